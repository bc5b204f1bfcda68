package supervisor

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"coregate/admin/spec"
	"coregate/plugins"
)

// UIDFile, beside config.yaml, keeps the node's id across restarts, as
// APISIX keeps it in conf/apisix.uid.
const UIDFile = "apisix.uid"

// NodeID is the node's id: the one kept in dir/UIDFile, or else id
// (apisix.id) or a new random UUID, then written there so that later
// starts keep it. A file that cannot be written leaves the id this
// start's only, as in APISIX (the error says so).
func NodeID(dir, id string) (string, error) {
	path := filepath.Join(dir, UIDFile)
	b, err := os.ReadFile(path)
	if err == nil {
		if s := strings.TrimRight(string(b), " \t\r\n"); s != "" {
			return s, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if id == "" {
		id = newUUID()
	}
	if err := os.WriteFile(path, []byte(id), 0o644); err != nil {
		return id, fmt.Errorf("node id not kept: %w", err)
	}
	return id, nil
}

// newUUID is a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// ControlOptions are what the Control API shows besides the configuration
// the supervisor holds.
type ControlOptions struct {
	// Addr is apisix.control's "ip:port".
	Addr string
	// Plugins is the registry the configuration is checked with, and
	// Enabled the plugins config.yaml enables: /v1/schema shows those of
	// them the registry has, /v1/plugin_metadatas their metadata.
	Plugins *plugins.Registry
	Enabled []string
	// KeyPrefix is what an object's key starts with: the etcd prefix
	// ("/apisix"), or "" for a standalone file (keys "/routes/1").
	KeyPrefix string
	// ID, Version and BootTime are /v1/server_info's id, version and
	// boot_time; EtcdVersion its etcd_version (nil: "unknown").
	ID          string
	Version     string
	BootTime    time.Time
	EtcdVersion func(context.Context) (string, error)
}

// ServeControl serves APISIX's Control API (apisix/control/v1.lua and
// the server-info plugin's /v1/server_info) on o.Addr until ctx is done.
// It answers from the configuration the supervisor holds (published by
// setSpec), read without holding up the supervisor's loop. A listener
// that cannot be opened is the error.
func (s *Supervisor) ServeControl(ctx context.Context, o ControlOptions) error {
	l, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("control API: %w", err)
	}
	srv := &http.Server{Handler: s.controlHandler(o), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("control API", "err", err)
		}
	}()
	s.log.Info("control API", "addr", l.Addr().String())
	return nil
}

// controlItem is an object as APISIX's control API dumps it: its key in
// the configuration and its value. (APISIX's modifiedIndex and the like
// are etcd's revisions, which the configuration a node holds does not
// keep.)
type controlItem struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

// controlHandler is the Control API's routes: APISIX's, methods and
// answers. What no route matches gets nginx's bare 404, as APISIX's
// ngx.exit(404).
func (s *Supervisor) controlHandler(o ControlOptions) http.Handler {
	item := func(kind string, id spec.ID, v any) controlItem {
		return controlItem{Key: o.KeyPrefix + "/" + kind + "/" + id.Str, Value: v}
	}
	routes := func() []controlItem {
		sp := s.current.Load()
		out := make([]controlItem, 0, len(sp.Routes))
		for _, r := range sp.Routes {
			out = append(out, item("routes", r.ID, r))
		}
		return out
	}
	services := func() []controlItem {
		sp := s.current.Load()
		out := make([]controlItem, 0, len(sp.Services))
		for _, r := range sp.Services {
			out = append(out, item("services", r.ID, r))
		}
		return out
	}
	upstreams := func() []controlItem {
		sp := s.current.Load()
		out := make([]controlItem, 0, len(sp.Upstreams))
		for _, r := range sp.Upstreams {
			out = append(out, item("upstreams", r.ID, r))
		}
		return out
	}
	one := func(kind string, list func() []controlItem) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			id := r.PathValue("id")
			for _, it := range list() {
				if strings.HasSuffix(it.Key, "/"+kind+"s/"+id) {
					controlJSON(w, http.StatusOK, it)
					return
				}
			}
			controlError(w, http.StatusNotFound, fmt.Sprintf("%s[%s] not found", kind, id))
		}
	}
	all := func(list func() []controlItem) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { controlJSON(w, http.StatusOK, list()) }
	}
	metadata := func() map[string]json.RawMessage {
		out := map[string]json.RawMessage{}
		for _, raw := range s.current.Load().PluginMetadata {
			var h struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(raw, &h) == nil && h.ID != "" {
				out[h.ID] = raw
			}
		}
		return out
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/schema", func(w http.ResponseWriter, r *http.Request) {
		controlJSON(w, http.StatusOK, controlSchema(o.Plugins, o.Enabled))
	})
	mux.HandleFunc("GET /v1/routes", all(routes))
	mux.HandleFunc("GET /v1/route/{id}", one("route", routes))
	mux.HandleFunc("GET /v1/services", all(services))
	mux.HandleFunc("GET /v1/service/{id}", one("service", services))
	mux.HandleFunc("GET /v1/upstreams", all(upstreams))
	mux.HandleFunc("GET /v1/upstream/{id}", one("upstream", upstreams))
	mux.HandleFunc("GET /v1/plugin_metadatas", func(w http.ResponseWriter, r *http.Request) {
		md := metadata()
		out := make([]json.RawMessage, 0, len(md))
		for _, name := range o.Enabled {
			if raw, ok := md[name]; ok {
				out = append(out, raw)
			}
		}
		controlJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET /v1/plugin_metadata/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		raw, ok := metadata()[name]
		if !ok {
			controlError(w, http.StatusNotFound, fmt.Sprintf("plugin metadata[%s] not found", name))
			return
		}
		controlJSON(w, http.StatusOK, raw)
	})
	mux.HandleFunc("GET /v1/server_info", func(w http.ResponseWriter, r *http.Request) {
		host, _ := os.Hostname()
		etcd := "unknown"
		if o.EtcdVersion != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			if v, err := o.EtcdVersion(ctx); err == nil && v != "" {
				etcd = v
			}
			cancel()
		}
		controlJSON(w, http.StatusOK, map[string]any{
			"etcd_version": etcd,
			"hostname":     host,
			"id":           o.ID,
			"version":      o.Version,
			"boot_time":    o.BootTime.Unix(),
		})
	})
	// The health checkers APISIX lists are those of the objects with
	// "checks" (Supervisor.Health): name, type, and each node's state
	// and counters.
	mux.HandleFunc("GET /v1/healthcheck", func(w http.ResponseWriter, r *http.Request) {
		hs := s.Health()
		if hs == nil {
			hs = []HealthUpstream{}
		}
		controlJSON(w, http.StatusOK, hs)
	})
	mux.HandleFunc("GET /v1/healthcheck/{rest...}", func(w http.ResponseWriter, r *http.Request) {
		s.healthChecker(w, r.PathValue("rest"))
	})
	// POST /v1/gc: APISIX runs a full collection of the Lua VM; the
	// supervisor runs Go's in its own process (workers collect their own,
	// off the requests' way) and answers APISIX's bare 200.
	mux.HandleFunc("POST /v1/gc", func(w http.ResponseWriter, r *http.Request) {
		runtime.GC()
		w.WriteHeader(http.StatusOK)
	})
	// PUT /v1/plugins/reload: coregate's plugins are compiled in, and the
	// enabled list is config.yaml's, re-read on SIGHUP.
	mux.HandleFunc("PUT /v1/plugins/reload", func(w http.ResponseWriter, r *http.Request) {
		controlError(w, http.StatusNotImplemented,
			"plugins are compiled into coregate: send the supervisor SIGHUP to re-read config.yaml's plugin list")
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		controlNotFound(w)
	})
}

// healthChecker is GET /v1/healthcheck/{src_type}/{src_id}, with
// APISIX's answers for a source that is not there or has no checker.
func (s *Supervisor) healthChecker(w http.ResponseWriter, rest string) {
	typ, id, _ := strings.Cut(rest, "/")
	if id == "" {
		controlError(w, http.StatusNotFound, "missing src id for src type "+typ)
		return
	}
	sp := s.current.Load()
	var found bool
	switch typ {
	case "routes":
		found = slices.ContainsFunc(sp.Routes, func(r *spec.Route) bool { return r.ID.Str == id })
	case "services":
		found = slices.ContainsFunc(sp.Services, func(r *spec.Service) bool { return r.ID.Str == id })
	case "upstreams":
		found = slices.ContainsFunc(sp.Upstreams, func(r *spec.Upstream) bool { return r.ID.Str == id })
	case "stream_routes":
	default:
		controlError(w, http.StatusBadRequest, "invalid src type "+typ)
		return
	}
	if !found {
		controlError(w, http.StatusNotFound, fmt.Sprintf("%s[%s] not found", typ, id))
		return
	}
	name := "/apisix/" + typ + "/" + id
	for _, h := range s.Health() {
		if h.Name == name {
			controlJSON(w, http.StatusOK, h)
			return
		}
	}
	controlError(w, http.StatusNotFound, fmt.Sprintf("no checker for %s[%s]", typ, id))
}

// controlSchemaKinds are the main schemas of /v1/schema, as APISIX names
// them; those spec has no schema for are left out.
var controlSchemaKinds = []string{
	"consumer", "consumer_group", "global_rule", "plugin_config", "plugins", "proto",
	"route", "service", "ssl", "stream_route", "upstream",
}

// controlSchema is /v1/schema's document: the main schemas, and the
// enabled plugins' schemas with their priorities (APISIX's version, type
// and scope are not known to coregate's registry, and are left out, as
// APISIX leaves out what a plugin does not define). There are no stream
// plugins.
func controlSchema(reg *plugins.Registry, enabled []string) map[string]any {
	main := map[string]json.RawMessage{}
	for _, k := range controlSchemaKinds {
		if doc := spec.ObjectSchema(k); doc != nil {
			main[k] = doc
		}
	}
	ps := map[string]any{}
	for _, name := range enabled {
		e, _, ok := reg.Lookup(name)
		if !ok {
			continue
		}
		p := map[string]any{"priority": e.Priority}
		if doc, ok := reg.Schema(name); ok {
			p["schema"] = json.RawMessage(doc)
		}
		if doc, ok := reg.ConsumerSchema(name); ok {
			p["consumer_schema"] = json.RawMessage(doc)
		}
		if doc, ok := reg.MetadataSchema(name); ok {
			p["metadata_schema"] = json.RawMessage(doc)
		}
		ps[name] = p
	}
	return map[string]any{"main": main, "plugins": ps, "stream_plugins": map[string]any{}}
}

func controlJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		controlError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// controlError is APISIX's {"error_msg": msg}.
func controlError(w http.ResponseWriter, status int, msg string) {
	controlJSON(w, status, map[string]string{"error_msg": msg})
}

// controlNotFoundPage is nginx's 404 page, which APISIX's control server
// answers for a path it does not serve.
const controlNotFoundPage = "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n" +
	"<center><h1>404 Not Found</h1></center>\r\n<hr><center>openresty</center>\r\n</body>\r\n</html>\r\n"

func controlNotFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte(controlNotFoundPage))
}
