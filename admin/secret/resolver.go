package secret

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"coregate/admin/keyring"
)

// DefaultTTL is how long a value read stays cached, as APISIX's
// apisix.lru.secret.ttl (300 s): a value changed in the secret manager is
// read again after it at the latest.
const DefaultTTL = 300 * time.Second

// DefaultNegTTL is how long a failure to read a value stays cached, as
// APISIX's apisix.lru.secret.neg_ttl (60 s): a manager that does not
// answer costs one Timeout per reference and minute, not one per object
// that holds it, so a build's time stays bounded.
const DefaultNegTTL = 60 * time.Second

// Resolver reads the secrets $secret:// references name (it is a
// plugins.SecretSource), from the secret objects it was given (Update):
// the object <manager>/<id> of "$secret://<manager>/<id>/<key>", its
// credentials decrypted with the keyring (a value that does not decrypt is
// used as it is, as in APISIX). Values are cached by reference, for TTL,
// failures for NegTTL, and both forgotten when their object changes or
// goes. Each read is one request bounded by Timeout. A Resolver is safe
// for concurrent use; no lock is held while a secret is read.
type Resolver struct {
	// Client makes the requests; nil is http.DefaultClient.
	Client *http.Client
	// Timeout bounds one read; 0 is DefaultTimeout.
	Timeout time.Duration
	// TTL bounds how long a value is cached; 0 is DefaultTTL.
	TTL time.Duration
	// NegTTL bounds how long a failure is cached; 0 is DefaultNegTTL.
	NegTTL time.Duration

	keyring *keyring.Keyring

	mu    sync.Mutex
	objs  map[string]string // "<manager>/<id>" → the object as stored
	cache map[string]cached // reference → value
}

type cached struct {
	obj   string // the object the value was read with
	value string
	err   error // the failure, when there is no value
	at    time.Time
}

// NewResolver returns a Resolver with no objects, whose objects'
// credentials decrypt with k (nil: stored in clear).
func NewResolver(k *keyring.Keyring) *Resolver {
	return &Resolver{keyring: k, objs: map[string]string{}, cache: map[string]cached{}}
}

// Update replaces the secret objects: each as stored, with its id
// "<manager>/<id>" (a Spec's Secrets); one without such an id is ignored.
// A value read with an object that changed or went is forgotten.
func (r *Resolver) Update(objs []json.RawMessage) {
	m := make(map[string]string, len(objs))
	for _, b := range objs {
		var o struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(b, &o) == nil && strings.Contains(o.ID, "/") {
			m[o.ID] = string(b)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.objs = m
	for ref, c := range r.cache {
		if id := refObject(ref); m[id] != c.obj {
			delete(r.cache, ref)
		}
	}
}

// refObject is the "<manager>/<id>" of a reference.
func refObject(ref string) string {
	p, err := ParseRef(ref)
	if err != nil {
		return ""
	}
	return p.Manager + "/" + p.ID
}

// Secret returns the value ref names, or why there is none: an error
// that names the reference's parts, never a value.
func (r *Resolver) Secret(ref string) (string, error) {
	p, err := ParseRef(ref)
	if err != nil {
		return "", err
	}
	id := p.Manager + "/" + p.ID
	ttl, negTTL := r.TTL, r.NegTTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if negTTL <= 0 {
		negTTL = DefaultNegTTL
	}
	r.mu.Lock()
	obj, ok := r.objs[id]
	c, hit := r.cache[ref]
	r.mu.Unlock()
	if !ok {
		return "", errors.New("no secret conf, secret_uri: " + ref)
	}
	if hit && c.obj == obj {
		switch age := time.Since(c.at); {
		case c.err == nil && age < ttl:
			return c.value, nil
		case c.err != nil && age < negTTL:
			return "", c.err
		}
	}
	v, err := r.read(p, obj)
	r.mu.Lock()
	if r.objs[id] == obj { // not changed meanwhile
		r.cache[ref] = cached{obj: obj, value: v, err: err, at: time.Now()}
	}
	r.mu.Unlock()
	if err != nil {
		return "", err
	}
	return v, nil
}

// read reads p's secret with obj, its object as stored.
func (r *Resolver) read(p Ref, obj string) (string, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(obj), &m); err != nil || m == nil {
		return "", errors.New("the secret conf " + p.Manager + "/" + p.ID + " is not a JSON object")
	}
	Open(p.Manager, m, r.keyring)
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	switch p.Manager {
	case ManagerVault:
		v := &Vault{}
		v.URI, _ = m["uri"].(string)
		v.Prefix, _ = m["prefix"].(string)
		v.Token, _ = m["token"].(string)
		v.Namespace, _ = m["namespace"].(string)
		v.Token = envValue(v.Token)
		return v.Get(ctx, r.Client, p.Key)
	case ManagerAWS:
		a := &AWS{}
		a.AccessKeyID, _ = m["access_key_id"].(string)
		a.SecretAccessKey, _ = m["secret_access_key"].(string)
		a.SessionToken, _ = m["session_token"].(string)
		a.Region, _ = m["region"].(string)
		a.EndpointURL, _ = m["endpoint_url"].(string)
		return a.Get(ctx, r.Client, p.Key)
	case ManagerGCP:
		var g GCP
		if err := json.Unmarshal([]byte(obj), &g); err != nil {
			return "", errors.New("the secret conf " + p.Manager + "/" + p.ID + " does not decode")
		}
		if g.AuthConfig != nil { // its private key as opened above
			g.AuthConfig.PrivateKey, _ = nested(m, "auth_config", "private_key")
		}
		return g.Get(ctx, r.Client, p.Key)
	}
	return "", errors.New("unknown secret manager: " + p.Manager)
}

// envValue is s, or the value of the environment variable s names when
// it is "$env://NAME" (in any case), as APISIX's vault client reads its
// token (env.fetch_by_uri); s itself when NAME is not set.
func envValue(s string) string {
	const prefix = "$env://"
	if len(s) <= len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return s
	}
	if v, ok := os.LookupEnv(s[len(prefix):]); ok {
		return v
	}
	return s
}

// nested is the string at m[a][b].
func nested(m map[string]any, a, b string) (string, bool) {
	inner, _ := m[a].(map[string]any)
	s, ok := inner[b].(string)
	return s, ok
}
