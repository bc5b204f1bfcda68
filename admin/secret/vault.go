package secret

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

// Prefix begins a reference to a secret of a manager, as APISIX writes
// it (in lower case only): $secret://<manager>/<id>/<key>.
const Prefix = "$secret://"

// Ref is a $secret:// reference taken apart, as APISIX's
// parse_secret_uri does: the manager, the id of its object (the one
// stored at /apisix/secrets/<manager>/<id>) and the key, which is the rest
// and may hold "/".
type Ref struct {
	Manager, ID, Key string
}

// ParseRef takes s, a reference, apart; the error is APISIX's.
func ParseRef(s string) (Ref, error) {
	p, ok := strings.CutPrefix(s, Prefix)
	if !ok {
		return Ref{}, errors.New("error secret_uri prefix: " + s)
	}
	manager, rest, ok := strings.Cut(p, "/")
	if !ok {
		return Ref{}, errors.New("error format: no secret manager")
	}
	id, key, ok := strings.Cut(rest, "/")
	if !ok {
		return Ref{}, errors.New("error format: no secret conf id")
	}
	if key == "" {
		return Ref{}, errors.New("error format: no secret key id")
	}
	return Ref{Manager: manager, ID: id, Key: key}, nil
}

// DefaultTimeout bounds one read of a secret, as APISIX's vault client
// does (5 s).
const DefaultTimeout = 5 * time.Second

// maxVaultBody bounds the answer read from Vault.
const maxVaultBody = 1 << 20

// Vault is a vault object: where Vault listens (uri), the path under
// /v1/ its secrets are at (prefix: a KV v2 engine's data path, such as
// "secret/data/apisix", or a KV v1 engine's path), the token sent as
// X-Vault-Token and the namespace sent as X-Vault-Namespace.
type Vault struct {
	URI       string `json:"uri"`
	Prefix    string `json:"prefix"`
	Token     string `json:"token"`
	Namespace string `json:"namespace"`
}

// Get reads key, "<path>/<member>", as APISIX's vault.get does: the
// secret at <prefix>/<path> with one GET (Vault's KV read endpoint), and
// its member <member>, a string. A KV v2 answer's data is under
// data.data, a KV v1 answer's under data; both are read. The request is
// bounded by ctx and by DefaultTimeout. An error never holds the value nor
// the answer's body, which may hold other secrets. Safe for concurrent
// use; c nil is http.DefaultClient.
func (v *Vault) Get(ctx context.Context, c *http.Client, key string) (string, error) {
	i := strings.LastIndexByte(key, '/')
	if i < 0 {
		return "", errors.New("error key format, key: " + key)
	}
	main, member := key[:i], key[i+1:]
	if main == "" {
		return "", errors.New("can't find main key, key: " + key)
	}
	if member == "" {
		return "", errors.New("can't find sub key, key: " + key)
	}
	if c == nil {
		c = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	u := strings.TrimRight(v.URI, "/") + path.Clean("/v1/"+v.Prefix+"/"+main)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", errors.New("failed to retrieve data from vault kv engine: " + err.Error())
	}
	req.Header.Set("X-Vault-Token", v.Token)
	if v.Namespace != "" {
		req.Header.Set("X-Vault-Namespace", v.Namespace)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", errors.New("failed to retrieve data from vault kv engine: " + scrubURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxVaultBody))
	if err != nil {
		return "", errors.New("failed to retrieve data from vault kv engine: " + err.Error())
	}
	if resp.StatusCode != http.StatusOK {
		return "", errors.New("failed to retrieve data from vault kv engine: status " + strconv.Itoa(resp.StatusCode))
	}
	var ans struct {
		Data map[string]json.RawMessage `json:"data"`
	}
	if json.Unmarshal(body, &ans) != nil || ans.Data == nil {
		return "", errors.New("failed to decode the answer of vault")
	}
	data := ans.Data
	if inner, ok := data["data"]; ok {
		if _, v2 := data["metadata"]; v2 {
			data = nil
			if json.Unmarshal(inner, &data) != nil || data == nil {
				return "", errors.New("failed to decode the answer of vault")
			}
		}
	}
	raw, ok := data[member]
	if !ok {
		return "", errors.New("no member " + strconv.Quote(member) + " in the secret " + main)
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", errors.New("the member " + strconv.Quote(member) + " of the secret " + main + " is not a string")
	}
	return s, nil
}

// scrubURLError is err's text without the URL net/http puts in it: the
// operation and the cause.
func scrubURLError(err error) string {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner.Error()
		}
	}
	return err.Error()
}
