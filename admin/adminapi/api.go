package adminapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"coregate/admin/keyring"
	"coregate/admin/nodeconf"
	"coregate/admin/spec"
	"coregate/admin/store"
	"coregate/plugins"
)

// Options configure New.
type Options struct {
	// Store is where objects are kept; required.
	Store store.Store
	// Admin is deployment.admin: keys, roles, allow_admin, CORS.
	Admin nodeconf.AdminConfig
	// Plugins checks each plugin configuration; nil means plugins.Default.
	Plugins *plugins.Registry
	// Log receives store failures; nil discards.
	Log *slog.Logger
	// Keyring encrypts the private keys stored (SSL objects' key and
	// keys, upstreams' tls.client_key): apisix.data_encryption's keyring;
	// nil stores them as sent.
	Keyring *keyring.Keyring
	// FieldsKeyring encrypts the plugins' secret fields stored (their
	// encrypt_fields): nodeconf.DataEncryption.FieldsKeyring; nil stores
	// them as sent.
	FieldsKeyring *keyring.Keyring
}

// maxBody is APISIX's limit on a request body (1.5 MiB).
const maxBody = 1572864

// requestTimeout bounds the store calls of one request.
const requestTimeout = 30 * time.Second

// serverHeader is what every answer names as its server, as APISIX's do.
const serverHeader = "APISIX/" + spec.CompatVersion

type api struct {
	st      store.Store
	prefix  string
	plugins *plugins.Registry
	log     *slog.Logger
	auth    auth
	cors    bool
	// keyring and fieldsKeyring are Options' (encrypt.go).
	keyring, fieldsKeyring *keyring.Keyring
}

// New returns the Admin API handler, to be served under /apisix/admin on
// admin_listen. It is safe for concurrent use. It fails on an
// allow_admin entry that is not an address or CIDR.
func New(o Options) (http.Handler, error) {
	if o.Store == nil {
		return nil, errors.New("adminapi: no store")
	}
	au, err := newAuth(o.Admin)
	if err != nil {
		return nil, err
	}
	a := &api{st: o.Store, prefix: o.Store.Prefix(), plugins: o.Plugins, log: o.Log, auth: au, cors: o.Admin.EnableAdminCORS,
		keyring: o.Keyring, fieldsKeyring: o.FieldsKeyring}
	if a.plugins == nil {
		a.plugins = plugins.Default
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	return a, nil
}

// request is one call on a resource, as run() in APISIX's admin/init.lua
// takes it apart.
type request struct {
	r        *http.Request
	rs       *resource
	id       string   // the id segment; "" when there is none
	sub      []string // the segments after the id (PATCH's sub-path)
	consumer string   // a credential's consumer
	manager  string   // a secret's manager (vault, aws, gcp)
	body     any      // the decoded body, nil when there is none
	hasBody  bool
	ttl      int64 // ?ttl=, 0 for none
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Server", serverHeader)
	if !a.auth.allowed(r.RemoteAddr) {
		h.Set("Content-Type", "text/html")
		writeBody(w, http.StatusForbidden, []byte(forbiddenPage))
		return
	}
	if a.cors {
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Origin", "*")
			h.Set("Access-Control-Allow-Methods", "POST, GET, PUT, OPTIONS, DELETE, PATCH")
			h.Set("Access-Control-Max-Age", "3600")
			h.Set("Access-Control-Allow-Headers", "*")
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Content-Type", "text/plain")
			writeBody(w, http.StatusOK, nil)
			return
		}
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Set("Access-Control-Expose-Headers", "*")
		h.Set("Access-Control-Max-Age", "3600")
	}
	h.Set("Content-Type", "application/json")
	h.Set("X-API-VERSION", "v3")

	segs, ok := adminSegments(r.URL.EscapedPath())
	switch {
	case !ok:
		writeError(w, errNoHandler)
		return
	case r.Method == http.MethodHead:
		if len(segs) == 0 {
			writeBody(w, http.StatusOK, nil)
		} else {
			writeError(w, errNoHandler)
		}
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete, http.MethodPatch:
	default:
		writeError(w, errNoHandler)
		return
	}
	if reason, ok := a.auth.authorize(r); !ok {
		a.log.Debug("admin api: failed to check token", "reason", reason, "remote", r.RemoteAddr)
		writeJSON(w, http.StatusUnauthorized, struct {
			ErrorMsg    string `json:"error_msg"`
			Description string `json:"description"`
		}{"failed to check token", reason})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	if e := a.route(ctx, w, r, segs); e != nil {
		if e.Status >= 500 {
			a.log.Warn("admin api: store failure", "method", r.Method, "path", r.URL.Path, "err", e.Msg)
		}
		writeError(w, e)
	}
}

// errNoHandler is APISIX's answer when its router has no handler.
var errNoHandler = &apiError{Status: http.StatusNotFound, Msg: "not found"}

// errStreamDisabled is APISIX's answer, to every method, on stream routes
// when apisix.proxy_mode is http, its default and the only mode coregate
// has.
var errStreamDisabled = badRequest("stream mode is disabled, can not add stream routes")

// adminSegments returns the segments of a path under /apisix/admin, given
// as it was sent (percent-encoded), normalised as nginx normalises $uri
// (slashes merged, dot segments resolved); ok is false for a path outside
// it. Each segment is decoded on its own, after the path is split and its
// dot segments resolved: an encoded "/" (%2F) is part of a segment, not a
// separator, and an encoded dot segment (%2E%2E) is a segment like any
// other, so that no segment, once decoded, moves a request to another
// resource than the path, as sent, names.
func adminSegments(escaped string) ([]string, bool) {
	var segs []string
	for s := range strings.SplitSeq(escaped, "/") {
		switch s {
		case "", ".":
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
		default:
			d, err := url.PathUnescape(s)
			if err != nil {
				return nil, false
			}
			segs = append(segs, d)
		}
	}
	if len(segs) < 2 || segs[0] != "apisix" || segs[1] != "admin" {
		return nil, false
	}
	return segs[2:], true
}

func seg(segs []string, i int) string {
	if i < len(segs) {
		return segs[i]
	}
	return ""
}

func tail(segs []string, i int) []string {
	if i < len(segs) {
		return segs[i:]
	}
	return nil
}

// route dispatches as APISIX's admin router and run() do.
func (a *api) route(ctx context.Context, w http.ResponseWriter, r *http.Request, segs []string) *apiError {
	switch {
	case r.Method == http.MethodGet && len(segs) == 2 && segs[0] == "plugins" && segs[1] == "list":
		return a.pluginsList(w, r)
	case r.Method == http.MethodPost && len(segs) >= 2 && segs[0] == "schema" && segs[1] == "validate":
		return a.schemaValidate(w, r, seg(segs, 2))
	case len(segs) == 2 && segs[0] == "plugins" && segs[1] == "reload":
		if r.Method != http.MethodPut {
			return badMethodReload(r.Method)
		}
		writeBody(w, http.StatusOK, []byte("done")) // plugins are compiled in: nothing to load
		return nil
	}

	res, id, sub := seg(segs, 0), seg(segs, 1), tail(segs, 2)
	if res == "schema" && id == "plugins" {
		res, id, sub = "plugins", seg(segs, 2), tail(segs, 3)
	}
	if res == "stream_routes" {
		return errStreamDisabled
	}
	var consumer string
	if res == "consumers" && seg(segs, 2) == "credentials" {
		res, consumer, id, sub = "credentials", id, seg(segs, 3), tail(segs, 4)
	}
	var manager string
	if res == "secrets" {
		// /secrets/{manager}/{id}: the manager's segment first
		// (admin/resource.lua's split_typ_and_id).
		manager, id, sub = id, seg(segs, 2), tail(segs, 3)
		if e := checkSecretPath(r.Method, manager, id); e != nil {
			return e
		}
	}
	rs := resources[res]
	if rs == nil && res != "plugins" && res != "schema" {
		return &apiError{Status: http.StatusNotFound, Msg: "Unsupported resource type: " + res}
	}
	if rs == nil && r.Method != http.MethodGet {
		return errNoHandler // plugins and schema only answer GET
	}

	rq := &request{r: r, rs: rs, id: id, sub: sub, consumer: consumer, manager: manager}
	if e := a.readBody(rq); e != nil {
		return e
	}
	if e := rq.readTTL(); e != nil {
		return e
	}
	switch {
	case res == "plugins":
		return a.pluginSchema(w, r, id)
	case res == "schema":
		return a.objectSchemaDoc(w, id)
	}
	if e := rq.checkPathIDs(); e != nil {
		return e
	}
	switch r.Method {
	case http.MethodGet:
		return a.get(ctx, w, rq)
	case http.MethodPut:
		return a.put(ctx, w, rq)
	case http.MethodPost:
		return a.post(ctx, w, rq)
	case http.MethodDelete:
		return a.delete(ctx, w, rq)
	default:
		return a.patch(ctx, w, rq)
	}
}

// readBody reads and decodes the request body: at most 1.5 MiB, JSON
// whatever the Content-Type says.
func (a *api) readBody(rq *request) *apiError {
	r := rq.r
	if r.ContentLength > maxBody {
		// Read it anyway (within reason), so that the client, still
		// sending, gets the answer rather than a reset connection.
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20))
		return tooLarge(r.ContentLength)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return badRequest("invalid request body: " + err.Error())
	}
	if len(b) > maxBody {
		// A body without Content-Length: count the rest, within reason.
		rest, _ := io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20))
		return tooLarge(int64(len(b)) + rest)
	}
	if len(b) == 0 {
		return nil
	}
	v, err := decodeJSON(b)
	if err == nil {
		if e := checkText(b); e != nil {
			err = e
		}
	}
	if err != nil {
		e := err.(*apiError)
		s := string(b)
		e.ReqBody = &s
		return e
	}
	rq.body, rq.hasBody = v, true
	return nil
}

// Details of the answer to an id in the path that is not one.
const (
	idDetail       = `an id is 1 to 64 characters of a-z, A-Z, 0-9, "-", "_" and "."`
	usernameDetail = `a username is 1 to 256 characters of a-z, A-Z, 0-9, "_" and "-"`
)

// checkPathIDs refuses ids in the path that APISIX's schemas would not
// allow in the object: an id, a consumer's username (that of a
// credential's consumer too), a plugin's name for plugin metadata. The
// key an id names is then <prefix>/<resource>/<id> and nothing else: no
// "/" nor dot segment that a decoded path segment brought in reaches
// another key, whatever the method.
func (rq *request) checkPathIDs() *apiError {
	if rq.consumer != "" && !spec.ValidUsername(rq.consumer) {
		return badUsername(rq.consumer)
	}
	switch {
	case rq.id == "":
		return nil
	case rq.rs.name == "consumers":
		if !spec.ValidUsername(rq.id) {
			return badUsername(rq.id)
		}
	case !spec.ValidStringID(rq.id) || rq.id == "." || rq.id == "..":
		what := rq.rs.kind + " id"
		if rq.rs.name == "plugin_metadata" {
			what = "plugin name"
		}
		return &apiError{Status: http.StatusBadRequest, Msg: "invalid " + what + " [" + rq.id + "]", Field: "id", Detail: idDetail}
	}
	return nil
}

func badUsername(name string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Msg: "invalid consumer username [" + name + "]",
		Field: "username", Detail: usernameDetail}
}

func tooLarge(n int64) *apiError {
	return badRequest("invalid request body: request size " + strconv.FormatInt(n, 10) +
		" is greater than the maximum size " + strconv.Itoa(maxBody) + " allowed")
}

// readTTL reads ?ttl=: a number in Lua's sense, as APISIX asks; it must
// come to at least one second, which etcd's leases need.
func (rq *request) readTTL() *apiError {
	q := rq.r.URL.Query()
	if !q.Has("ttl") {
		return nil
	}
	f, ok := spec.LuaNumber([]byte(q.Get("ttl")))
	if !ok || math.IsNaN(f) {
		return badRequest("invalid argument ttl: should be a number")
	}
	if f < 1 || f > math.MaxInt32 {
		return badRequest("invalid argument ttl: should be a number of seconds from 1 to " + strconv.Itoa(math.MaxInt32))
	}
	rq.ttl = int64(f)
	return nil
}

func badMethodReload(method string) *apiError {
	return &apiError{Status: http.StatusMethodNotAllowed,
		Msg: "please use PUT method to reload the plugins, " + method + " method is not allowed."}
}

// notSupported is APISIX's 405 for a method a resource refuses.
func notSupported(method string, rs *resource) *apiError {
	return &apiError{Status: http.StatusMethodNotAllowed, Msg: "not supported `" + method + "` method for " + rs.kind}
}

// key is the store key of an object; dir the directory of a resource.
func (a *api) key(dir, id string) string { return a.prefix + "/" + dir + "/" + id }
func (a *api) dir(dir string) string     { return a.prefix + "/" + dir + "/" }

// keyOf and dirOf are key and dir for the request's resource, credentials
// living under their consumer and secrets under their manager.
func (a *api) keyOf(rq *request, id string) string { return a.dirOf(rq) + id }

func (a *api) dirOf(rq *request) string {
	switch {
	case rq.rs.name == "credentials":
		return a.dir("consumers/" + rq.consumer + "/credentials")
	case rq.rs.name == "secrets" && rq.manager != "":
		return a.dir("secrets/" + rq.manager)
	}
	return a.dir(rq.rs.name)
}
