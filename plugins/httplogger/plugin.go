package httplogger

import (
	"bytes"
	"crypto/tls"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"coregate/plugins"
	"coregate/plugins/internal/batch"
	"coregate/plugins/internal/logentry"
	"coregate/plugins/internal/varexpr"
)

// Name is the plugin's wire name.
const Name = "http-logger"

var (
	//go:embed schema.json
	schema []byte
	//go:embed metadata_schema.json
	metadataSchema []byte
)

// DroppedMetric is the Prometheus counter of the entries http-logger
// dropped, by reason: queue_full, every buffer of the processor taken
// when the log phase pushed the entry (max_pending_entries), and
// send_failed, the entries of a batch still refused after
// max_retry_count retries.
const DroppedMetric = "coregate_http_logger_dropped_entries_total"

func init() {
	plugins.Register(Name, Plugin{})
	plugins.RegisterMetric(plugins.MetricFamily{Name: DroppedMetric, Kind: plugins.Counter,
		Help: "Log entries the http-logger plugin dropped, by reason (queue_full, send_failed).", Labels: []string{"reason"}})
}

// Plugin is http-logger's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin               = Plugin{}
	_ plugins.MetadataSchemaPlugin = Plugin{}
	_ plugins.LogPhase             = (*instance)(nil)
	_ plugins.ResponseHeadReader   = (*instance)(nil)
	_ plugins.ResponseBodyReader   = (*instance)(nil)
)

// Schema implements plugins.Plugin: APISIX's schema, with the batch
// processor's members (batch-processor-manager's wrap_schema).
func (Plugin) Schema() []byte { return schema }

// MetadataSchema implements plugins.MetadataSchemaPlugin: log_format,
// log_format_extra and max_pending_entries.
func (Plugin) MetadataSchema() []byte { return metadataSchema }

// conf is a configuration as the schema lets it through, its defaults
// filled in.
type conf struct {
	URI                 string          `json:"uri"`
	AuthHeader          string          `json:"auth_header"`
	Timeout             int             `json:"timeout"`
	LogFormat           json.RawMessage `json:"log_format"`
	LogFormatExtra      json.RawMessage `json:"log_format_extra"`
	IncludeReqBody      bool            `json:"include_req_body"`
	IncludeReqBodyExpr  json.RawMessage `json:"include_req_body_expr"`
	IncludeRespBody     bool            `json:"include_resp_body"`
	IncludeRespBodyExpr json.RawMessage `json:"include_resp_body_expr"`
	MaxReqBodyBytes     int             `json:"max_req_body_bytes"`
	MaxRespBodyBytes    int64           `json:"max_resp_body_bytes"`
	ConcatMethod        string          `json:"concat_method"`
	SSLVerify           bool            `json:"ssl_verify"`
	batch.Config
}

type metadata struct {
	LogFormat         json.RawMessage `json:"log_format"`
	LogFormatExtra    json.RawMessage `json:"log_format_extra"`
	MaxPendingEntries int             `json:"max_pending_entries"`
}

// Check implements plugins.Plugin: the include_*_expr lists are checked
// with APISIX's messages.
func (Plugin) Check(raw json.RawMessage) error {
	_, err := parse(raw)
	return err
}

func parse(raw json.RawMessage) (*conf, error) {
	c := conf{Timeout: 3, ConcatMethod: "json", MaxReqBodyBytes: 524288, MaxRespBodyBytes: logentry.DefaultMaxRespBodyBytes, Config: batch.Defaults}
	c.Name = "http logger"
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	for _, x := range []struct {
		name string
		raw  json.RawMessage
	}{{"include_req_body_expr", c.IncludeReqBodyExpr}, {"include_resp_body_expr", c.IncludeRespBodyExpr}} {
		if x.raw != nil {
			if _, err := varexpr.Compile(x.raw); err != nil {
				return nil, fmt.Errorf("failed to validate the '%s' expression: %v", x.name, err)
			}
		}
	}
	u, err := url.Parse(c.URI)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("uri: %q is not an http:// or https:// URL", c.URI)
	}
	return &c, nil
}

// Build implements plugins.Plugin: the entry's format (the
// configuration's log_format, else the plugin metadata's) and the batch
// processor of the configuration, shared by every instance of the same
// sending and batching members in the process.
func (Plugin) Build(raw json.RawMessage, env plugins.Env) (plugins.Instance, error) {
	c, err := parse(raw)
	if err != nil {
		return nil, err
	}
	md := metadata{MaxPendingEntries: 8192}
	if m := env.Metadata.Of(Name); m != nil {
		if err := json.Unmarshal(m, &md); err != nil {
			return nil, fmt.Errorf("plugin metadata: %w", err)
		}
	}
	in := &instance{}
	if in.req, err = logentry.NewReqBody(c.IncludeReqBody, c.IncludeReqBodyExpr, c.MaxReqBodyBytes); err != nil {
		return nil, err
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
	if in.resp, err = logentry.NewRespBody(c.IncludeRespBody && !in.custom, c.IncludeRespBodyExpr, c.MaxRespBodyBytes); err != nil {
		return nil, err
	}
	var failed *atomic.Uint64
	if env.Metrics != nil {
		in.dropped = env.Metrics.Slot(DroppedMetric, "queue_full")
		failed = env.Metrics.Slot(DroppedMetric, "send_failed")
	}
	if in.p, err = processorOf(c, md.MaxPendingEntries, failed); err != nil {
		return nil, err
	}
	return logentry.WithReqBody(in, &in.req), nil
}

func nonEmpty(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && len(m) > 0
}

// instance is one configuration, built, for one event loop: line and tmp
// are its scratch, in which Log builds an entry before the batch
// processor copies it.
type instance struct {
	p      *batch.Shared
	custom bool
	format logentry.Format
	extra  logentry.Format
	req    logentry.Body // include_req_body's
	resp   logentry.Body // include_resp_body's, for the default entry
	// dropped is DroppedMetric's queue_full series, this worker's slot
	// (nil without metrics), which Log counts on its event loop.
	dropped *atomic.Uint64

	line, tmp []byte
}

// ResponseBodyLimit implements plugins.ResponseBodyReader:
// max_resp_body_bytes with include_resp_body (the default entry's
// response.body), else 0.
func (in *instance) ResponseBodyLimit() int64 { return in.resp.Limit() }

// ReadsResponseHead implements plugins.ResponseHeadReader: the default
// entry has the response's headers (response.headers), a log_format
// does not.
func (in *instance) ReadsResponseHead() bool { return !in.custom }

// Log implements plugins.LogPhase: the entry is built into the
// instance's buffer and pushed to the batch processor, which copies it;
// dropped (and counted) when the processor's buffers are all taken. It
// neither blocks nor allocates once the buffers have grown.
func (in *instance) Log(c plugins.Ctx) {
	if in.custom {
		in.line = logentry.AppendCustom(in.line[:0], c, in.format, "no-matched")
	} else {
		in.line = logentry.AppendFull(in.line[:0], &in.tmp, c, in.extra, "no-matched", in.req.Of(c), in.resp.Of(c))
	}
	if !in.p.Push(in.line) && in.dropped != nil {
		in.dropped.Add(1)
	}
}

// processors are the batch processors by configuration (their sending
// and batching members), as APISIX's batch-processor-manager keeps one
// per configuration: a processor lives as long as instances built with
// its configuration do, then sends what it holds and stops
// (batch.Shared).
var processors batch.Registry

func processorOf(c *conf, pending int, failed *atomic.Uint64) (*batch.Shared, error) {
	key, _ := json.Marshal(struct {
		URI, Auth, Concat string
		Timeout, Pending  int
		SSLVerify         bool
		batch.Config
	}{c.URI, c.AuthHeader, c.ConcatMethod, c.Timeout, pending, c.SSLVerify, c.Config})
	return processors.Get(string(key), func() (*batch.Processor, error) {
		s := newSender(c)
		p, err := batch.New(c.Config, s.send, pending, nil)
		if err != nil {
			return nil, err
		}
		p.OnClose(s.client.CloseIdleConnections)
		if failed != nil {
			p.CountFailed(failed)
		}
		return p, nil
	})
}

// sender POSTs the batches of one processor, from its goroutine: body is
// its scratch.
type sender struct {
	uri, auth, contentType string
	host, port             string
	hostHeader             string // the uri's host without its port, as APISIX sends it
	newLine, single        bool
	client                 *http.Client
	body                   []byte
}

func newSender(c *conf) *sender {
	u, _ := url.Parse(c.URI)
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	hostHeader := u.Hostname()
	if strings.Contains(hostHeader, ":") {
		hostHeader = "[" + hostHeader + "]"
	}
	s := &sender{uri: c.URI, auth: c.AuthHeader, host: u.Hostname(), port: port, hostHeader: hostHeader,
		newLine: c.ConcatMethod == "new_line", single: c.BatchMaxSize == 1, contentType: "application/json"}
	if s.newLine {
		s.contentType = "text/plain"
	}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: !c.SSLVerify},
		DialContext:         (&net.Dialer{Timeout: time.Duration(c.Timeout) * time.Second}).DialContext,
		MaxIdleConnsPerHost: 1,
	}
	s.client = &http.Client{Transport: tr, Timeout: time.Duration(c.Timeout) * time.Second}
	return s
}

// send is the batch processor's SendFunc: the entries as a JSON array
// (one object alone when batch_max_size is 1), or one per line, in one
// POST.
func (s *sender) send(entries [][]byte) (int, error) {
	b := s.body[:0]
	switch {
	case s.single:
		b = append(b, entries[0]...)
	case s.newLine:
		b = append(b, bytes.Join(entries, []byte("\n"))...)
	default:
		b = append(b, '[')
		b = append(b, bytes.Join(entries, []byte(","))...)
		b = append(b, ']')
	}
	s.body = b
	if err := s.post(b); err != nil {
		return 0, err
	}
	return len(entries), nil
}

func (s *sender) post(body []byte) error {
	req, err := http.NewRequest("POST", s.uri, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Host = s.hostHeader
	req.Header.Set("Content-Type", s.contentType)
	if s.auth != "" {
		req.Header.Set("Authorization", s.auth)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("error while sending data to [%s] port[%s] %v", s.host, s.port, err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode >= 400 {
		return fmt.Errorf("server returned status code[%d] host[%s] port[%s] body[%s]", resp.StatusCode, s.host, s.port, rb)
	}
	return nil
}
