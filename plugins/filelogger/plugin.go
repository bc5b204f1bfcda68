package filelogger

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"coregate/plugins"
	"coregate/plugins/internal/logentry"
	"coregate/plugins/internal/varexpr"
)

// Name is the plugin's wire name.
const Name = "file-logger"

var (
	//go:embed schema.json
	schema []byte
	//go:embed metadata_schema.json
	metadataSchema []byte
)

// DroppedMetric is the Prometheus counter of the entries file-logger
// dropped, every buffer of their file's writer being queued (the file not
// keeping up).
const DroppedMetric = "coregate_file_logger_dropped_entries_total"

func init() {
	plugins.Register(Name, Plugin{})
	plugins.RegisterMetric(plugins.MetricFamily{Name: DroppedMetric, Kind: plugins.Counter,
		Help: "Log entries the file-logger plugin dropped, its file not keeping up."})
}

// Plugin is file-logger's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin               = Plugin{}
	_ plugins.MetadataSchemaPlugin = Plugin{}
	_ plugins.LogPhase             = (*instance)(nil)
	_ plugins.ResponseHeadReader   = (*instance)(nil)
	_ plugins.ResponseBodyReader   = (*instance)(nil)
)

// Schema implements plugins.Plugin: APISIX's schema.
func (Plugin) Schema() []byte { return schema }

// MetadataSchema implements plugins.MetadataSchemaPlugin: APISIX's
// metadata_schema, a path, log_format and log_format_extra for every
// file-logger without its own.
func (Plugin) MetadataSchema() []byte { return metadataSchema }

// conf is a configuration as the schema lets it through.
type conf struct {
	Path            *string         `json:"path"`
	LogFormat       json.RawMessage `json:"log_format"`
	LogFormatExtra  json.RawMessage `json:"log_format_extra"`
	IncludeReqBody  bool            `json:"include_req_body"`
	IncludeReqExpr  json.RawMessage `json:"include_req_body_expr"`
	MaxReqBodyBytes int             `json:"max_req_body_bytes"`
	IncludeRespBody bool            `json:"include_resp_body"`
	// include_resp_body_expr and max_resp_body_bytes, as
	// include_resp_body reads them.
	IncludeRespBodyExpr json.RawMessage `json:"include_resp_body_expr"`
	MaxRespBodyBytes    int64           `json:"max_resp_body_bytes"`
	Match               json.RawMessage `json:"match"`
}

// metadata is the plugin metadata's object.
type metadata struct {
	Path           *string         `json:"path"`
	LogFormat      json.RawMessage `json:"log_format"`
	LogFormatExtra json.RawMessage `json:"log_format_extra"`
}

// errNoPath is APISIX's refusal of a configuration with no path.
var errNoPath = errors.New(`property "path" is not set in either the plugin conf or the metadata`)

// Check implements plugins.Plugin: match and include_req_body_expr must
// be lua-resty-expr lists (APISIX's message). Whether a
// configuration without a path has one in the plugin metadata is not
// known here: Build logs APISIX's error when neither has one.
func (Plugin) Check(raw json.RawMessage) error {
	_, err := parse(raw)
	return err
}

func parse(raw json.RawMessage) (*conf, error) {
	c := conf{MaxReqBodyBytes: 524288, MaxRespBodyBytes: logentry.DefaultMaxRespBodyBytes}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	if c.IncludeReqExpr != nil {
		if _, err := varexpr.Compile(c.IncludeReqExpr); err != nil {
			return nil, fmt.Errorf("failed to validate the 'include_req_body_expr' expression: %v", err)
		}
	}
	if c.Match != nil {
		if err := varexpr.Check(c.Match); err != nil {
			return nil, fmt.Errorf("failed to validate the 'match' expression: %v", err)
		}
	}
	return &c, nil
}

// Build implements plugins.Plugin: the path, log_format and
// log_format_extra of the configuration, or else of the plugin metadata
// (env.Metadata), and the writer of the path, shared by every instance
// writing to it in the process.
func (Plugin) Build(raw json.RawMessage, env plugins.Env) (plugins.Instance, error) {
	c, err := parse(raw)
	if err != nil {
		return nil, err
	}
	var md metadata
	if m := env.Metadata.Of(Name); m != nil {
		if err := json.Unmarshal(m, &md); err != nil {
			return nil, fmt.Errorf("plugin metadata: %w", err)
		}
	}
	path := c.Path
	if path == nil {
		path = md.Path
	}
	if path == nil {
		// As file-logger.lua's log phase when the metadata's path is
		// gone: the error is logged and nothing written. Failing the
		// build would refuse every route of the snapshot.
		slog.Error("file-logger: " + errNoPath.Error())
		return &instance{}, nil
	}
	in := &instance{w: writerOf(*path)}
	if in.req, err = logentry.NewReqBody(c.IncludeReqBody, c.IncludeReqExpr, c.MaxReqBodyBytes); err != nil {
		return nil, err
	}
	if env.Metrics != nil {
		in.dropped = env.Metrics.Slot(DroppedMetric)
	}
	if c.Match != nil {
		if in.match, err = varexpr.CompileAny(c.Match); err != nil {
			return nil, err
		}
	}
	format := c.LogFormat
	if format == nil && nonEmpty(md.LogFormat) {
		format = md.LogFormat
	}
	extra := c.LogFormatExtra
	if extra == nil {
		extra = md.LogFormatExtra
	}
	if format != nil {
		in.custom = true
		if in.format, err = logentry.CompileFormat(format, true); err != nil {
			return nil, fmt.Errorf("log_format: %w", err)
		}
	} else if extra != nil {
		if in.extra, err = logentry.CompileFormat(extra, false); err != nil {
			return nil, fmt.Errorf("log_format_extra: %w", err)
		}
		in.extra = logentry.DropDefaults(in.extra)
	}
	// A log_format's entry has no response.body.
	if in.resp, err = logentry.NewRespBody(c.IncludeRespBody && !in.custom, c.IncludeRespBodyExpr, c.MaxRespBodyBytes); err != nil {
		// As APISIX, which compiles the expression in body_filter only:
		// the error is logged, and the body left out.
		slog.Error("file-logger: " + err.Error())
		in.resp = logentry.Body{}
	}
	return logentry.WithReqBody(in, &in.req), nil
}

// nonEmpty reports whether raw is an object with members.
func nonEmpty(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && len(m) > 0
}

// instance is one configuration, built, used by one event loop. It is
// read-only once built but for ev, which the loop's requests take in
// turn; the entries it writes go into the writer's buffers (writer.take),
// which the instances of every event loop writing to the path share.
type instance struct {
	w      *writer // nil without a path: nothing is written
	match  varexpr.Any
	ev     varexpr.Evaluator // match's, over the request being logged
	custom bool              // log_format: the entry is format, then route_id and service_id
	format logentry.Format   // log_format, compiled
	extra  logentry.Format   // log_format_extra's members not in the default entry
	req    logentry.Body     // include_req_body's
	resp   logentry.Body     // include_resp_body's, for the default entry
	// dropped is DroppedMetric's series, this worker's slot (nil without
	// metrics), which Log counts on its event loop.
	dropped *atomic.Uint64
}

// ResponseBodyLimit implements plugins.ResponseBodyReader:
// max_resp_body_bytes with include_resp_body (the default entry's
// response.body), else 0.
func (in *instance) ResponseBodyLimit() int64 { return in.resp.Limit() }

// ReadsResponseHead implements plugins.ResponseHeadReader: the default
// entry has the response's headers (response.headers), a log_format
// does not.
func (in *instance) ReadsResponseHead() bool { return !in.custom }

// Log implements plugins.LogPhase: the request's entry, one JSON line,
// is written into a buffer of the writer and queued for it; when every
// buffer is queued (the file cannot keep up) the entry is dropped and
// counted. It neither blocks nor allocates once the buffers have grown to
// the entries' size.
func (in *instance) Log(c plugins.Ctx) {
	if in.w == nil {
		return
	}
	if in.match != nil && !in.ev.EvalAny(c, in.match) {
		return
	}
	b := in.w.take()
	if b == nil {
		if in.dropped != nil {
			in.dropped.Add(1)
		}
		return
	}
	if in.custom {
		b.line = logentry.AppendCustom(b.line[:0], c, in.format, "")
	} else {
		b.line = logentry.AppendFull(b.line[:0], &b.tmp, c, in.extra, "", in.req.Of(c), in.resp.Of(c))
	}
	b.line = append(b.line, '\n')
	in.w.put(b)
}
