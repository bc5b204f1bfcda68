package adminapi

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"coregate/admin/spec"
)

// list is GET of a resource: {list, total}, in creation order, filtered
// by name, label, uri and filter, then paged when both page and page_size
// are given (APISIX's v3_adapter.lua). total counts what the filters kept.
func (a *api) list(ctx context.Context, rw http.ResponseWriter, rq *request) *apiError {
	dir := a.dirOf(rq)
	kvs, _, err := a.st.List(ctx, dir)
	if err != nil {
		return storeError(err)
	}
	q := rq.r.URL.Query()
	f := newListFilter(q, rq.rs)
	items := []kvBody{}
	for _, kv := range kvs {
		if !directChild(kv.Key, dir) && (rq.rs.name != "secrets" || rq.manager != "" || !listsSecret(kv.Key, dir)) {
			continue // a consumer's credentials, under its key
		}
		obj, _ := decodeStored(kv.Value)
		if !f.match(obj) {
			continue
		}
		items = append(items, readEnvelope(kv, a.shown(rq.rs, kv.Value)))
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].CreatedIndex < items[j].CreatedIndex })
	total := len(items)

	page, okPage := spec.LuaNumber([]byte(q.Get("page")))
	size, okSize := spec.LuaNumber([]byte(q.Get("page_size")))
	if okPage && okSize && q.Has("page") && q.Has("page_size") {
		if !(size >= 10 && size <= 500) {
			writeBody(rw, http.StatusBadRequest, []byte("page_size must be between 10 and 500"))
			return nil
		}
		if !(page >= 1) || math.IsInf(page, 0) {
			page = 1
		}
		from := (math.Floor(page) - 1) * math.Floor(size)
		to := from + math.Floor(size)
		switch {
		case from >= float64(len(items)):
			items = []kvBody{}
		case to >= float64(len(items)):
			items = items[int(from):]
		default:
			items = items[int(from):int(to)]
		}
	}
	writeJSON(rw, http.StatusOK, listBody{List: items, Total: total})
	return nil
}

// directChild reports whether key is an object of dir, not one nested
// deeper (/apisix/consumers/jack/credentials/a under /apisix/consumers/).
func directChild(key, dir string) bool {
	rest, ok := strings.CutPrefix(key, dir)
	return ok && rest != "" && !strings.Contains(rest, "/")
}

// listFilter is the list's name, label, uri and filter arguments. As in
// APISIX, name and uri are regular expressions (RE2 here, PCRE there)
// and one that does not compile matches nothing.
type listFilter struct {
	name, uri       *regexp.Regexp
	hasName, hasURI bool
	label           string
	hasLabel        bool
	fields          url.Values // filter=, the members allowed for the resource
	badFilter       bool
}

func newListFilter(q url.Values, rs *resource) *listFilter {
	f := &listFilter{}
	if f.hasName = q.Has("name"); f.hasName {
		f.name, _ = regexp.Compile(q.Get("name"))
	}
	if f.hasURI = q.Has("uri"); f.hasURI {
		f.uri, _ = regexp.Compile(q.Get("uri"))
	}
	f.label, f.hasLabel = q.Get("label"), q.Has("label")
	if q.Has("filter") {
		v, err := url.ParseQuery(q.Get("filter"))
		f.badFilter = err != nil
		f.fields = url.Values{}
		for k, vals := range v {
			if rs.filterFields[k] {
				f.fields[k] = vals
			}
		}
	}
	return f
}

func (f *listFilter) match(obj map[string]any) bool {
	if f.hasName {
		name, ok := obj["name"].(string)
		if !ok || f.name == nil || !f.name.MatchString(name) {
			return false
		}
	}
	if f.hasLabel {
		labels, _ := obj["labels"].(map[string]any)
		if _, ok := labels[f.label]; !ok {
			return false
		}
	}
	if f.hasURI && !f.matchURI(obj) {
		return false
	}
	if f.badFilter {
		return false
	}
	for k, vals := range f.fields {
		// The last value, as APISIX takes it; an id written as a number
		// matches its text.
		t, ok := idText(obj[k])
		if !ok || t != vals[len(vals)-1] {
			return false
		}
	}
	return true
}

func (f *listFilter) matchURI(obj map[string]any) bool {
	if f.uri == nil {
		return false
	}
	if u, ok := obj["uri"].(string); ok && f.uri.MatchString(u) {
		return true
	}
	uris, _ := obj["uris"].([]any)
	for _, u := range uris {
		if s, ok := u.(string); ok && f.uri.MatchString(s) {
			return true
		}
	}
	return false
}
