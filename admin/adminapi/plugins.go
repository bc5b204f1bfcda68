package adminapi

import (
	"errors"
	"net/http"
	"sort"
	"strings"

	"coregate/admin/spec"
)

// pluginsList is GET /apisix/admin/plugins/list: the plugins this
// gateway has, by priority (highest first), as APISIX lists its enabled
// ones. There are no stream plugins.
func (a *api) pluginsList(rw http.ResponseWriter, r *http.Request) *apiError {
	sub := r.URL.Query().Get("subsystem")
	switch sub {
	case "", "http":
	case "stream":
		writeJSON(rw, http.StatusOK, []string{})
		return nil
	default:
		writeBody(rw, http.StatusBadRequest, []byte("invalid subsystem passed"))
		return nil
	}
	names := a.plugins.Names()
	prio := make(map[string]int, len(names))
	for _, n := range names {
		e, _, _ := a.plugins.Lookup(n)
		prio[n] = e.Priority
	}
	sort.SliceStable(names, func(i, j int) bool { return prio[names[i]] > prio[names[j]] })
	writeJSON(rw, http.StatusOK, names)
	return nil
}

// pluginSchema is GET /apisix/admin/plugins/{name} (and
// /apisix/admin/schema/plugins/{name}): the JSON Schema the registry
// checks that plugin's configuration with.
func (a *api) pluginSchema(rw http.ResponseWriter, r *http.Request, name string) *apiError {
	q := r.URL.Query()
	sub := q.Get("subsystem")
	switch sub {
	case "":
		sub = "http"
	case "http", "stream":
	default:
		return badRequest("unsupported subsystem: " + sub)
	}
	doc, ok := a.plugins.Schema(name)
	if !ok || sub == "stream" {
		return &apiError{Status: http.StatusNotFound, Msg: "plugin not found in subsystem " + sub}
	}
	if q.Get("schema_type") == "consumer" {
		if doc, ok = a.plugins.ConsumerSchema(name); !ok {
			return badRequest("not found schema") // APISIX's answer for a plugin without one
		}
	}
	writeBody(rw, http.StatusOK, doc)
	return nil
}

// objectSchemaDoc is GET /apisix/admin/schema/{kind}: the schema an
// object kind is validated with, self-contained.
func (a *api) objectSchemaDoc(rw http.ResponseWriter, kind string) *apiError {
	doc := spec.ObjectSchema(kind)
	if doc == nil {
		doc = localSchemaJSON(kind)
	}
	if doc == nil {
		return badRequest("not found schema: " + kind)
	}
	writeBody(rw, http.StatusOK, doc)
	return nil
}

// schemaValidate is POST /apisix/admin/schema/validate/{resource}: the
// body against the resource's schema alone, 200 with no body when it
// passes (references and plugins are not looked at, as in APISIX).
func (a *api) schemaValidate(rw http.ResponseWriter, r *http.Request, res string) *apiError {
	rs := resources[res]
	if rs == nil {
		return &apiError{Status: http.StatusNotFound, Msg: "Unsupported resource type: " + res}
	}
	rq := &request{r: r, rs: rs}
	if e := a.readBody(rq); e != nil {
		return e
	}
	if err := rs.schemaCheck(encodeJSON(rq.body)); err != nil {
		e := invalid(err, "")
		var ve *spec.ValidationError
		if errors.As(err, &ve) {
			e.Msg = strings.TrimPrefix(e.Msg, "invalid configuration: ")
		}
		return e
	}
	writeBody(rw, http.StatusOK, nil)
	return nil
}
