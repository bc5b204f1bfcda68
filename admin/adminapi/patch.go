package adminapi

import (
	"context"
	"net/http"
	"strings"

	"coregate/admin/store"
)

// patch is PATCH: the body merged into the stored object
// (/routes/{id}), or put at a sub-path of it (/routes/{id}/upstream/nodes),
// then checked as a whole and written with a compare-and-swap on the
// revision read, so that a concurrent write is never lost; when another
// write came between, all of it (read, merge, check, write) is done again
// (retryCAS), where APISIX answers 503 "value changed before overwritten".
// Each try starts from the object then stored.
func (a *api) patch(ctx context.Context, rw http.ResponseWriter, rq *request) *apiError {
	rs := rq.rs
	if rs.noPatch {
		return notSupported("PATCH", rs)
	}
	if rq.id == "" {
		return badRequest("missing " + rs.kind + " id")
	}
	if !rq.hasBody {
		return badRequest("missing new configuration")
	}
	conf, isObj := rq.body.(map[string]any)
	if len(rq.sub) == 0 && !isObj {
		return badRequest("invalid configuration")
	}
	key := a.keyOf(rq, rq.id)
	return retryCAS(ctx, func() *apiError {
		old, err := a.st.Get(ctx, key)
		if err != nil {
			return storeError(err)
		}
		obj, ok := decodeStored(old.Value)
		if !ok {
			obj = map[string]any{}
		}
		// Merged and checked in clear, encrypted again as it is stored.
		a.openPlugins(rs, obj)

		now := epoch()
		if len(rq.sub) > 0 {
			if e := patchPath(obj, rq.sub, rq.body); e != nil {
				return e
			}
			obj["update_time"] = now
		} else {
			merge(obj, conf)
			if conf["update_time"] == nil {
				obj["update_time"] = now
			}
		}
		if obj["create_time"] == nil {
			obj["create_time"] = now
		}

		w, e := a.prepare(rq, obj, true, true)
		if e != nil {
			return e
		}
		if e := a.check(ctx, w); e != nil {
			return e
		}
		stored := a.seal(rs, w.raw)
		kv, _, err := a.st.Put(ctx, key, stored, store.PutOptions{IfModRevision: old.ModRevision, TTL: rq.ttl})
		if err != nil {
			return storeError(err) // a conflict: read, merge and check again
		}
		writeJSON(rw, http.StatusOK, kvBody{Key: kv.Key, Value: stored})
		return nil
	})
}

// merge is APISIX's core.table.merge: members of src replace those of
// dst, objects merge into objects, null deletes, arrays (and an empty
// object, which Lua cannot tell from an empty array) replace.
func merge(dst, src map[string]any) {
	for k, v := range src {
		switch sv := v.(type) {
		case nil:
			delete(dst, k)
		case map[string]any:
			dm, ok := dst[k].(map[string]any)
			if !ok || len(sv) == 0 {
				dm = map[string]any{}
				dst[k] = dm
			}
			merge(dm, sv)
		default:
			dst[k] = v
		}
	}
}

// patchPath is APISIX's core.table.patch: v replaces the member at the
// path, missing objects on the way are created; null deletes the member.
// A path through something other than an object is refused.
func patchPath(obj map[string]any, path []string, v any) *apiError {
	cur := obj
	for i, name := range path[:len(path)-1] {
		switch next := cur[name].(type) {
		case nil:
			m := map[string]any{}
			cur[name] = m
			cur = m
		case map[string]any:
			cur = next
		default:
			return badRequest("invalid sub-path: /" + strings.Join(path[:i+1], "/"))
		}
	}
	last := path[len(path)-1]
	if v == nil {
		delete(cur, last)
	} else {
		cur[last] = v
	}
	return nil
}
