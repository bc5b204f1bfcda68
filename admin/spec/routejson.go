package spec

import (
	"bytes"
	"encoding/json"
	"sync"
)

// routeJSON is a Route's JSON form: every field in one struct, in
// schema_def.lua's order, as Route was before its rare fields went to
// RouteExtra, so that the stored form, the Config frames and the Spec's
// hash are byte for byte what they were.
type routeJSON struct {
	ID              ID                         `json:"id,omitzero"`
	Name            string                     `json:"name,omitempty"`
	Desc            string                     `json:"desc,omitempty"`
	Labels          map[string]string          `json:"labels,omitempty"`
	URI             string                     `json:"uri,omitempty"`
	URIs            []string                   `json:"uris,omitempty"`
	Priority        *int                       `json:"priority,omitempty"`
	Methods         []string                   `json:"methods,omitempty"`
	Host            string                     `json:"host,omitempty"`
	Hosts           []string                   `json:"hosts,omitempty"`
	RemoteAddr      string                     `json:"remote_addr,omitempty"`
	RemoteAddrs     []string                   `json:"remote_addrs,omitempty"`
	Vars            Vars                       `json:"vars,omitempty"`
	FilterFunc      string                     `json:"filter_func,omitempty"`
	Plugins         map[string]json.RawMessage `json:"plugins,omitzero"`
	PluginConfigID  ID                         `json:"plugin_config_id,omitzero"`
	Upstream        *Upstream                  `json:"upstream,omitempty"`
	UpstreamID      ID                         `json:"upstream_id,omitzero"`
	ServiceID       ID                         `json:"service_id,omitzero"`
	Script          string                     `json:"script,omitempty"`
	ScriptID        ID                         `json:"script_id,omitzero"`
	Timeout         *Timeout                   `json:"timeout,omitempty"`
	EnableWebsocket *bool                      `json:"enable_websocket,omitempty"`
	Status          *int                       `json:"status,omitempty"`
	CreateTime      int64                      `json:"create_time,omitempty"`
	UpdateTime      int64                      `json:"update_time,omitempty"`
}

// routeJSONs are routeJSONs for MarshalJSON and UnmarshalJSON to fill:
// encoding/json takes the one it reads or writes by pointer, which would
// otherwise be a 448-byte allocation a route each way. Put back zeroed.
var routeJSONs = sync.Pool{New: func() any { return new(routeJSON) }}

// toJSON is r's JSON form.
func (r *Route) toJSON() routeJSON {
	e := r.Rare()
	return routeJSON{
		ID: r.ID, Name: r.Name, Desc: e.Desc, Labels: e.Labels, URI: r.URI, URIs: e.URIs,
		Priority: r.Priority, Methods: r.Methods, Host: r.Host, Hosts: r.Hosts,
		RemoteAddr: e.RemoteAddr, RemoteAddrs: e.RemoteAddrs, Vars: e.Vars, FilterFunc: e.FilterFunc,
		Plugins: r.Plugins, PluginConfigID: e.PluginConfigID, Upstream: r.Upstream,
		UpstreamID: r.UpstreamID, ServiceID: r.ServiceID, Script: e.Script, ScriptID: e.ScriptID,
		Timeout: e.Timeout, EnableWebsocket: e.EnableWebsocket, Status: r.Status,
		CreateTime: r.CreateTime, UpdateTime: r.UpdateTime,
	}
}

// set makes r's fields j's (PluginList left as it is), r.Extra a new
// RouteExtra, or nil when none of the rare ones is set.
func (r *Route) set(j *routeJSON) {
	r.ID, r.Name, r.URI, r.Priority, r.Methods, r.Host, r.Hosts = j.ID, j.Name, j.URI, j.Priority, j.Methods, j.Host, j.Hosts
	r.Plugins, r.Upstream, r.UpstreamID, r.ServiceID, r.Status = j.Plugins, j.Upstream, j.UpstreamID, j.ServiceID, j.Status
	r.CreateTime, r.UpdateTime = j.CreateTime, j.UpdateTime
	e := RouteExtra{
		Desc: j.Desc, Labels: j.Labels, URIs: j.URIs, RemoteAddr: j.RemoteAddr, RemoteAddrs: j.RemoteAddrs,
		Vars: j.Vars, FilterFunc: j.FilterFunc, PluginConfigID: j.PluginConfigID, Script: j.Script,
		ScriptID: j.ScriptID, Timeout: j.Timeout, EnableWebsocket: j.EnableWebsocket,
	}
	r.Extra = nil
	if !e.empty() {
		r.Extra = &e // a new one: a copy of r may share the old
	}
}

// MarshalJSON writes r as routeJSON. HTML characters are left as they
// are: encoding/json escapes them in a Marshaler's output when its own
// encoder does, so the bytes are those a plain struct gives either way.
// json.Marshal, which escapes them, writes r first; only where it wrote
// an escape (\u: HTML characters, U+2028 and U+2029, control characters)
// is r written again by an encoder that leaves them (the pooled
// json.Marshal is the cheaper: 5 000 routes of bench admin's form
// allocated 2.5 MB against 6.3 through the encoder alone).
// A value receiver, so that a Route not addressable is written the same.
func (r Route) MarshalJSON() ([]byte, error) {
	j := routeJSONs.Get().(*routeJSON)
	defer func() { *j = routeJSON{}; routeJSONs.Put(j) }()
	*j = r.toJSON()
	return marshalPlain(j)
}

// marshalPlain is v's JSON form with its HTML characters left as they
// are (see Route's MarshalJSON): json.Marshal's, written again by an
// encoder that leaves them only where json.Marshal wrote a \u escape.
func marshalPlain(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || !bytes.Contains(b, []byte(`\u`)) {
		return b, err
	}
	var w bytes.Buffer
	enc := json.NewEncoder(&w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(w.Bytes(), []byte("\n")), nil
}

// UnmarshalJSON reads routeJSON into r: as into a plain struct, the
// fields data does not have keep their values.
func (r *Route) UnmarshalJSON(data []byte) error {
	j := routeJSONs.Get().(*routeJSON)
	defer func() { *j = routeJSON{}; routeJSONs.Put(j) }()
	*j = r.toJSON()
	if err := json.Unmarshal(data, j); err != nil {
		return err
	}
	r.set(j)
	return nil
}
