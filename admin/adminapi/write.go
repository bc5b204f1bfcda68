package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"coregate/admin/secret"
	"coregate/admin/spec"
	"coregate/admin/store"
)

// postIDPlaceholder stands for the id POST mints while the object is
// checked, so that an invalid object does not use up an id: the minted
// one has the same form (20 digits).
const postIDPlaceholder = "00000000000000000000"

// prepare is the part of APISIX's check_conf that comes before the
// schema: the id (from the URL or the body, needed or refused) and, unless
// allowTime, the timestamps a client may not set.
func (a *api) prepare(rq *request, obj map[string]any, needID, allowTime bool) (*write, *apiError) {
	rs := rq.rs
	w := &write{rs: rs, obj: obj, urlID: rq.id, consumer: rq.consumer, manager: rq.manager}
	urlID := rq.id
	if rs.name == "secrets" && urlID != "" {
		urlID = rq.manager + "/" + urlID // the id APISIX stores
	}
	if !rs.noID {
		bodyID, hasBodyID := obj["id"]
		given := rq.id != "" || hasBodyID
		switch {
		case needID && !given:
			return nil, &apiError{Status: http.StatusBadRequest, Msg: "missing " + rs.kind + " id", Field: "id"}
		case !needID && given:
			return nil, &apiError{Status: http.StatusBadRequest, Msg: "wrong " + rs.kind + " id, do not need it", Field: "id"}
		}
		if urlID != "" {
			if hasBodyID {
				if t, ok := idText(bodyID); !ok || t != urlID {
					return nil, &apiError{Status: http.StatusBadRequest, Msg: "wrong " + rs.kind + " id", Field: "id"}
				}
			}
			obj["id"] = urlID
		}
	}
	if !allowTime {
		if e := forbidTimes(obj); e != nil {
			return nil, e
		}
	}
	return w, nil
}

// forbidTimes refuses timestamps a PUT or POST sends, where APISIX looks
// for them; the two spaces are APISIX's.
func forbidTimes(obj map[string]any) *apiError {
	type place struct {
		prefix string
		m      map[string]any
	}
	where := []place{{"", obj}}
	if u, ok := obj["upstream"].(map[string]any); ok {
		where = append(where, place{"upstream.", u})
	}
	if p, ok := obj["plugins"].(map[string]any); ok {
		where = append(where, place{"plugins.", p})
	}
	for _, w := range where {
		for _, k := range []string{"create_time", "update_time"} {
			if truthy(w.m, k) {
				return &apiError{Status: http.StatusBadRequest, Field: w.prefix + k,
					Msg: "the property is forbidden:  " + w.prefix + k}
			}
		}
	}
	return nil
}

// check encodes the object and validates it; on success w.raw is what
// is to be stored and w.id the id its key ends with.
func (a *api) check(ctx context.Context, w *write) *apiError {
	w.raw = encodeJSON(w.obj)
	if !w.rs.noID {
		w.id = idOf(w.obj) // as Lua's tostring writes it
	}
	if bytes.Contains(w.raw, []byte(secret.Prefix)) {
		if e := a.readSecrets(ctx); e != nil {
			return e
		}
	}
	if e := w.rs.check(a, ctx, w); e != nil {
		return e
	}
	// A credential's id may be written "<username>/credentials/<id>"; in
	// a key, only its own id goes.
	if w.id == "" || strings.Contains(w.id, "/") {
		return &apiError{Status: http.StatusBadRequest, Msg: "wrong " + w.rs.kind + " id", Field: "id"}
	}
	return a.checkGroups(ctx, w)
}

// idOf is spec.RawID(encodeJSON(obj), "id").String(), the id as the
// object's key ends with it, read from the id member alone: RawID parsed
// the whole encoded object for it, 47 of the 724 allocations of a route
// PUT (BenchmarkPutRoute/inprocess). A string is RawID's as it is (the
// encoding decodes back to it); anything else is given to RawID in an
// object of its own, encoded as it is within obj's encoding
// (TestIDOf).
func idOf(obj map[string]any) string {
	v, ok := obj["id"]
	if !ok {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	b := append([]byte(`{"id":`), encodeJSON(v)...)
	return spec.RawID(append(b, '}'), "id").String()
}

// checkBody validates a body that is not an object: the kind's own check
// refuses it with the schema's message.
func (a *api) checkBody(ctx context.Context, rq *request) *apiError {
	w := &write{rs: rq.rs, raw: encodeJSON(rq.body), urlID: rq.id, consumer: rq.consumer, manager: rq.manager}
	if e := rq.rs.check(a, ctx, w); e != nil {
		return e
	}
	return badRequest("invalid configuration")
}

func epoch() json.Number { return json.Number(strconv.FormatInt(time.Now().Unix(), 10)) }

// put is PUT: 201 for a new key, 200 for a replaced one, the previous
// create_time kept.
func (a *api) put(ctx context.Context, rw http.ResponseWriter, rq *request) *apiError {
	if !rq.hasBody {
		return badRequest("missing configurations")
	}
	obj, ok := rq.body.(map[string]any)
	if !ok {
		return a.checkBody(ctx, rq)
	}
	w, e := a.prepare(rq, obj, true, false)
	if e != nil {
		return e
	}
	if !rq.rs.noTime {
		now := epoch()
		obj["create_time"], obj["update_time"] = now, now
	}
	if e := a.check(ctx, w); e != nil {
		return e
	}
	key := a.keyOf(rq, w.id)
	checked := w.raw
	return retryCAS(ctx, func() *apiError {
		prev, err := a.st.Get(ctx, key)
		ifRev := int64(-1)
		switch {
		case err == nil:
			ifRev = prev.ModRevision
			if p, ok := decodeStored(prev.Value); ok && p["create_time"] != nil && !rq.rs.noTime {
				obj["create_time"] = p["create_time"]
				w.raw = encodeJSON(obj)
			}
		case !errors.Is(err, store.ErrNotFound):
			return storeError(err)
		}
		// w.raw is obj's encoding: obj changes here only, encoded again
		// right away, and a new key (a bulk load's) leaves it as check
		// encoded it, where it was encoded again for nothing (38 of a
		// route PUT's 848 allocations, BenchmarkPutRoute/inprocess).
		if !bytes.Equal(w.raw, checked) {
			if e := a.check(ctx, w); e != nil {
				return e
			}
			checked = w.raw
		}
		stored := a.seal(rq.rs, w.raw)
		kv, old, err := a.st.Put(ctx, key, stored, store.PutOptions{IfModRevision: ifRev, TTL: rq.ttl})
		if err != nil {
			return storeError(err) // a conflict: written meanwhile, take its create_time and try again
		}
		status := http.StatusCreated
		if old.Key != "" {
			status = http.StatusOK
		}
		writeJSON(rw, status, kvBody{Key: kv.Key, Value: stored})
		return nil
	})
}

// Backoff of retryCAS: the first wait is up to casFirstWait, each next
// one up to twice the one before, at most casMaxWait.
const (
	casFirstWait = time.Millisecond
	casMaxWait   = 64 * time.Millisecond
)

// retryCAS runs try, a read-modify-write that ends in a compare-and-swap,
// again each time it loses to another write (storeError's answer to
// store.ErrConflict, lost), after a random wait that grows, until ctx
// ends (the request's time, which bounds the store's calls too): so a
// write that APISIX never refuses for a concurrent one is not refused
// here either, and none is lost. What else try answers is the answer.
func retryCAS(ctx context.Context, try func() *apiError) *apiError {
	wait := casFirstWait
	for {
		e := try()
		if e == nil || !e.lost {
			return e
		}
		t := time.NewTimer(rand.N(wait) + 1)
		select {
		case <-ctx.Done():
			t.Stop()
			return e
		case <-t.C:
		}
		wait = min(2*wait, casMaxWait)
	}
}

// post is POST: a new object under an id the store mints.
func (a *api) post(ctx context.Context, rw http.ResponseWriter, rq *request) *apiError {
	if rq.rs.noPost {
		return notSupported("POST", rq.rs)
	}
	if !rq.hasBody {
		return badRequest("missing configurations")
	}
	obj, ok := rq.body.(map[string]any)
	if !ok {
		return a.checkBody(ctx, rq)
	}
	w, e := a.prepare(rq, obj, false, false)
	if e != nil {
		return e
	}
	now := epoch()
	obj["create_time"], obj["update_time"] = now, now
	obj["id"] = postIDPlaceholder
	if e := a.check(ctx, w); e != nil {
		return e
	}
	id, err := a.st.GenID(ctx)
	if err != nil {
		return storeError(err)
	}
	obj["id"] = id
	w.raw = a.seal(rq.rs, encodeJSON(obj))
	kv, _, err := a.st.Put(ctx, a.keyOf(rq, id), w.raw, store.PutOptions{IfModRevision: -1, TTL: rq.ttl})
	if err != nil {
		return storeError(err)
	}
	writeJSON(rw, http.StatusCreated, kvBody{Key: kv.Key, Value: w.raw})
	return nil
}

// get is GET of one object, or of the list when there is no id.
func (a *api) get(ctx context.Context, rw http.ResponseWriter, rq *request) *apiError {
	if rq.id == "" {
		return a.list(ctx, rw, rq)
	}
	kv, err := a.st.Get(ctx, a.keyOf(rq, rq.id))
	if err != nil {
		return storeError(err)
	}
	writeJSON(rw, http.StatusOK, readEnvelope(kv, a.shown(rq.rs, kv.Value)))
	return nil
}

// shown is a stored value as GET shows it: an SSL object without its
// private keys, plugins' secret fields decrypted (as APISIX shows them),
// and a value that is not JSON (written by something else) as a string
// rather than a broken answer.
func (a *api) shown(rs *resource, v []byte) []byte {
	if !json.Valid(v) {
		return encodeJSON(string(v))
	}
	has, _ := pluginsOf(rs)
	has = has || rs.name == "secrets"
	if rs.name != "ssls" && (!has || a.fieldsKeyring == nil) {
		return v
	}
	m, ok := decodeStored(v)
	if !ok {
		return v
	}
	if rs.name == "ssls" {
		delete(m, "key")
		delete(m, "keys")
	} else {
		a.openPlugins(rs, m)
	}
	return encodeJSON(m)
}

// delete is DELETE: refused while another object refers to this one,
// unless force=true; a consumer goes with its credentials.
func (a *api) delete(ctx context.Context, rw http.ResponseWriter, rq *request) *apiError {
	if rq.id == "" {
		return badRequest("missing " + rq.rs.kind + " id")
	}
	if rq.r.URL.Query().Get("force") != "true" {
		if e := a.inUse(ctx, rq.rs, rq.id); e != nil {
			return e
		}
	}
	if rq.rs.name == "consumers" {
		creds, _, err := a.st.List(ctx, a.dir("consumers/"+rq.id+"/credentials"))
		if err != nil {
			return storeError(err)
		}
		for _, c := range creds {
			if _, err := a.st.Delete(ctx, c.Key, 0); err != nil && !errors.Is(err, store.ErrNotFound) {
				return storeError(err)
			}
		}
	}
	key := a.keyOf(rq, rq.id)
	if _, err := a.st.Delete(ctx, key, 0); err != nil {
		return storeError(err)
	}
	writeJSON(rw, http.StatusOK, deletedBody{Deleted: "1", Key: key})
	return nil
}

// inUse finds an object that refers to the one about to be deleted.
func (a *api) inUse(ctx context.Context, rs *resource, id string) *apiError {
	if rs.name == "upstreams" {
		if e := a.upstreamInPlugins(ctx, rs, id); e != nil {
			return e
		}
	}
	for _, ref := range rs.usedBy {
		dir := a.dir(ref.dir)
		kvs, _, err := a.st.List(ctx, dir)
		if err != nil {
			return storeError(err)
		}
		for _, kv := range kvs {
			if !directChild(kv.Key, dir) || spec.RawID(kv.Value, ref.field).String() != id {
				continue
			}
			by := spec.RawID(kv.Value, "id").String()
			if by == "" { // a consumer: its key's, the username
				by = kv.Key[strings.LastIndexByte(kv.Key, '/')+1:]
			}
			return &apiError{Status: http.StatusBadRequest,
				Msg: rs.refusal + ref.kind + " [" + by + "] is still using it now"}
		}
	}
	return nil
}

// pluginUpstreamRefs are the objects whose plugins may name an upstream
// (traffic-split's weighted_upstreams[].upstream_id), in the order
// APISIX's upstream delete_checker looks through them, with the kind its
// message names.
var pluginUpstreamRefs = []reference{
	{"routes", "route", ""}, {"services", "service", ""}, {"plugin_configs", "plugin_config", ""},
	{"consumers", "consumer", ""}, {"consumer_groups", "consumer_group", ""}, {"global_rules", "global_rules", ""},
}

// upstreamInPlugins finds an object whose traffic-split names upstream id:
// APISIX's "can not delete this upstream, plugin in route [1] is still
// using it now".
func (a *api) upstreamInPlugins(ctx context.Context, rs *resource, id string) *apiError {
	for _, ref := range pluginUpstreamRefs {
		dir := a.dir(ref.dir)
		kvs, _, err := a.st.List(ctx, dir)
		if err != nil {
			return storeError(err)
		}
		for _, kv := range kvs {
			if !directChild(kv.Key, dir) || !splitNames(kv.Value, id) {
				continue
			}
			by := spec.RawID(kv.Value, "id").String()
			return &apiError{Status: http.StatusBadRequest,
				Msg: rs.refusal + "plugin in " + ref.kind + " [" + by + "] is still using it now"}
		}
	}
	return nil
}

// splitNames reports whether an object's traffic-split names upstream id
// in one of its weighted upstreams.
func splitNames(obj []byte, id string) bool {
	if !bytes.Contains(obj, []byte(`"traffic-split"`)) {
		return false
	}
	var o struct {
		Plugins struct {
			Split struct {
				Rules []struct {
					WeightedUpstreams []struct {
						UpstreamID spec.ID `json:"upstream_id"`
					} `json:"weighted_upstreams"`
				} `json:"rules"`
			} `json:"traffic-split"`
		} `json:"plugins"`
	}
	if json.Unmarshal(obj, &o) != nil {
		return false
	}
	for _, r := range o.Plugins.Split.Rules {
		for _, w := range r.WeightedUpstreams {
			if !w.UpstreamID.IsZero() && w.UpstreamID.String() == id {
				return true
			}
		}
	}
	return false
}
