package spec

import (
	"encoding/json"
	"sync"
)

// upstreamJSON is an Upstream's JSON form: every field in one struct, in
// schema_def.lua's order, as Upstream was before its rare fields went to
// UpstreamExtra, so that the stored form, the Config frames and the
// Spec's hash are byte for byte what they were.
type upstreamJSON struct {
	ID            ID                `json:"id,omitzero"`
	Name          string            `json:"name,omitempty"`
	Desc          string            `json:"desc,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Type          string            `json:"type,omitempty"`
	Nodes         Nodes             `json:"nodes,omitzero"`
	ServiceName   string            `json:"service_name,omitempty"`
	DiscoveryType string            `json:"discovery_type,omitempty"`
	DiscoveryArgs json.RawMessage   `json:"discovery_args,omitempty"`
	HashOn        string            `json:"hash_on,omitempty"`
	Key           string            `json:"key,omitempty"`
	Retries       *int              `json:"retries,omitempty"`
	RetryTimeout  *float64          `json:"retry_timeout,omitempty"`
	Timeout       *Timeout          `json:"timeout,omitempty"`
	Scheme        string            `json:"scheme,omitempty"`
	PassHost      string            `json:"pass_host,omitempty"`
	UpstreamHost  string            `json:"upstream_host,omitempty"`
	KeepalivePool *KeepalivePool    `json:"keepalive_pool,omitempty"`
	Checks        json.RawMessage   `json:"checks,omitempty"`
	TLS           json.RawMessage   `json:"tls,omitempty"`
	CreateTime    int64             `json:"create_time,omitempty"`
	UpdateTime    int64             `json:"update_time,omitempty"`
}

// upstreamJSONs are upstreamJSONs for MarshalJSON and UnmarshalJSON to
// fill, as routeJSONs are for routes: a 352-byte allocation an upstream
// each way otherwise. Put back zeroed.
var upstreamJSONs = sync.Pool{New: func() any { return new(upstreamJSON) }}

// toJSON is u's JSON form.
func (u *Upstream) toJSON() upstreamJSON {
	e := u.Rare()
	return upstreamJSON{
		ID: u.ID, Name: e.Name, Desc: e.Desc, Labels: e.Labels, Type: u.Type, Nodes: u.Nodes,
		ServiceName: e.ServiceName, DiscoveryType: e.DiscoveryType, DiscoveryArgs: e.DiscoveryArgs,
		HashOn: e.HashOn, Key: e.Key, Retries: e.Retries, RetryTimeout: e.RetryTimeout, Timeout: e.Timeout,
		Scheme: e.Scheme, PassHost: e.PassHost, UpstreamHost: e.UpstreamHost, KeepalivePool: e.KeepalivePool,
		Checks: e.Checks, TLS: e.TLS, CreateTime: u.CreateTime, UpdateTime: u.UpdateTime,
	}
}

// set makes u's fields j's, u.Extra a new UpstreamExtra, or nil when none
// of the rare ones is set.
func (u *Upstream) set(j *upstreamJSON) {
	u.ID, u.Type, u.Nodes, u.CreateTime, u.UpdateTime = j.ID, j.Type, j.Nodes, j.CreateTime, j.UpdateTime
	e := UpstreamExtra{
		Name: j.Name, Desc: j.Desc, Labels: j.Labels, ServiceName: j.ServiceName, DiscoveryType: j.DiscoveryType,
		DiscoveryArgs: j.DiscoveryArgs, HashOn: j.HashOn, Key: j.Key, Retries: j.Retries,
		RetryTimeout: j.RetryTimeout, Timeout: j.Timeout, Scheme: j.Scheme, PassHost: j.PassHost,
		UpstreamHost: j.UpstreamHost, KeepalivePool: j.KeepalivePool, Checks: j.Checks, TLS: j.TLS,
	}
	u.Extra = nil
	if !e.empty() {
		u.Extra = &e // a new one: a copy of u may share the old
	}
}

// MarshalJSON writes u as upstreamJSON, its HTML characters as Route's
// MarshalJSON leaves them (marshalPlain). A value receiver, so that an
// Upstream not addressable is written the same.
func (u Upstream) MarshalJSON() ([]byte, error) {
	j := upstreamJSONs.Get().(*upstreamJSON)
	defer func() { *j = upstreamJSON{}; upstreamJSONs.Put(j) }()
	*j = u.toJSON()
	return marshalPlain(j)
}

// UnmarshalJSON reads upstreamJSON into u: as into a plain struct, the
// fields data does not have keep their values.
func (u *Upstream) UnmarshalJSON(data []byte) error {
	j := upstreamJSONs.Get().(*upstreamJSON)
	defer func() { *j = upstreamJSON{}; upstreamJSONs.Put(j) }()
	*j = u.toJSON()
	if err := json.Unmarshal(data, j); err != nil {
		return err
	}
	u.set(j)
	return nil
}
