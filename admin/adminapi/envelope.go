package adminapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"coregate/admin/spec"
	"coregate/admin/store"
)

// apiError is a request the API refuses: the status and the body's
// members. Msg is APISIX's error_msg text; Field and Detail, when spec
// knows them, name what is wrong where Msg does not.
type apiError struct {
	Status  int
	Msg     string
	Field   string
	Detail  string
	ReqBody *string // the request body echoed back, for a body that is not JSON
	// NotFound selects APISIX's other form, {"message":"Key not found"}.
	NotFound bool
	// lost: a compare-and-swap lost to another write (retryCAS tries
	// again).
	lost bool
}

func (e *apiError) Error() string { return e.Msg }

func badRequest(msg string) *apiError { return &apiError{Status: http.StatusBadRequest, Msg: msg} }

// errKeyNotFound is etcd's answer for a key that is not there, as APISIX
// passes it on.
var errKeyNotFound = &apiError{Status: http.StatusNotFound, NotFound: true}

// storeError turns a store failure into its answer: 404 for a missing key,
// 503 with the backend's text otherwise (unreachable, timed out, a
// compare-and-swap that lost), as APISIX answers etcd errors.
func storeError(err error) *apiError {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errKeyNotFound
	case errors.Is(err, store.ErrConflict):
		return &apiError{Status: http.StatusServiceUnavailable, Msg: "value changed before overwritten", lost: true}
	case errors.Is(err, store.ErrReadOnly):
		return badRequest("the configuration is read-only (standalone file): " + err.Error())
	}
	return &apiError{Status: http.StatusServiceUnavailable, Msg: err.Error()}
}

// invalid turns a validation error from spec or the plugin registry into
// a 400. under prefixes the field ("plugins.limit-count").
func invalid(err error, under string) *apiError {
	e := badRequest(err.Error())
	var ve *spec.ValidationError
	if errors.As(err, &ve) {
		e.Field, e.Detail = ve.Field, ve.Detail
	}
	if under != "" {
		if e.Field == "" {
			e.Field = under
		} else if e.Field[0] == '[' {
			e.Field = under + e.Field
		} else {
			e.Field = under + "." + e.Field
		}
	}
	return e
}

// errorBody is the JSON of an apiError.
type errorBody struct {
	ErrorMsg string  `json:"error_msg"`
	Field    string  `json:"field,omitempty"`
	Detail   string  `json:"detail,omitempty"`
	ReqBody  *string `json:"req_body,omitempty"`
}

// kvBody is the envelope of one stored object: {key, value} for writes,
// with createdIndex and modifiedIndex for reads.
type kvBody struct {
	Key           string          `json:"key"`
	Value         json.RawMessage `json:"value"`
	CreatedIndex  int64           `json:"createdIndex,omitempty"`
	ModifiedIndex int64           `json:"modifiedIndex,omitempty"`
}

// listBody is the envelope of a list; List is never null.
type listBody struct {
	List  []kvBody `json:"list"`
	Total int      `json:"total"`
}

// deletedBody is DELETE's answer; Deleted is a string, as APISIX has it.
type deletedBody struct {
	Deleted string `json:"deleted"`
	Key     string `json:"key"`
}

// readEnvelope is GET's envelope of one object.
func readEnvelope(kv store.KV, value []byte) kvBody {
	return kvBody{Key: kv.Key, Value: value, CreatedIndex: kv.CreateRevision, ModifiedIndex: kv.ModRevision}
}

// writeJSON answers status with v as JSON, HTML characters unescaped.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only a RawMessage that is not JSON fails, and values are checked
		// before they get here; say so rather than send half a body.
		status, b = http.StatusInternalServerError, bytes.Buffer{}
		b.WriteString(`{"error_msg":"failed to encode the response"}`)
	}
	writeBody(w, status, b.Bytes())
}

// writeBody answers status with body as it is.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeError answers e.
func writeError(w http.ResponseWriter, e *apiError) {
	if e.NotFound {
		writeJSON(w, e.Status, map[string]string{"message": "Key not found"})
		return
	}
	writeJSON(w, e.Status, errorBody{ErrorMsg: e.Msg, Field: e.Field, Detail: e.Detail, ReqBody: e.ReqBody})
}

// forbiddenPage is the page nginx answers a client that allow_admin
// leaves out, as APISIX's Admin API does.
const forbiddenPage = "<html>\r\n<head><title>403 Forbidden</title></head>\r\n<body>\r\n" +
	"<center><h1>403 Forbidden</h1></center>\r\n<hr><center>openresty</center>\r\n</body>\r\n</html>\r\n"
