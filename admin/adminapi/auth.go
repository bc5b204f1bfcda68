package adminapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"

	"coregate/admin/nodeconf"
	"coregate/admin/spec"
)

// The keys APISIX shipped as defaults up to 3.9 (conf/config-default.yaml),
// still in its documentation and in scripts written against it: public,
// so only acceptable where nobody else can reach the Admin API.
const (
	LegacyAdminKey  = "edd1c9f034335f136f87ad84b625c8f1"
	LegacyViewerKey = "4054f7cf07e344346cd3f287985e76a2"
)

// ErrLegacyKey: a public legacy key is configured while the Admin API
// listens on an address other than loopback.
var ErrLegacyKey = errors.New("adminapi: a public default admin key on a non-loopback admin_listen")

// ErrNoKey: the Admin API requires a key, admits more than APISIX's
// default 127.0.0.0/24, and has none (admin_key null or empty).
var ErrNoKey = errors.New("adminapi: missing valid Admin API token")

// CheckKeys refuses a configuration that sets one of APISIX's public
// default keys (LegacyAdminKey, LegacyViewerKey) while
// deployment.admin.admin_listen is not a loopback address: with such a
// key, anyone who can reach the port can change the gateway (the error
// wraps ErrLegacyKey). As APISIX's start does, it refuses one that
// requires a key but has none (admin_key null or []) unless allow_admin
// is APISIX's default, loopback only: the Admin API would otherwise
// answer every address it admits with no token asked (ErrNoKey). Start-up
// calls it before serving; the error says what to change.
func CheckKeys(cfg nodeconf.AdminConfig) error {
	if !cfg.AdminKeyRequired {
		return nil
	}
	if len(cfg.AdminKey) == 0 && !slices.Equal(cfg.AllowAdmin, []string{"127.0.0.0/24"}) {
		return fmt.Errorf("%w: deployment.admin.admin_key is %s while deployment.admin.allow_admin admits %q: "+
			"set a key (an empty key has one generated at first start)", ErrNoKey, describeKeys(cfg.AdminKey), cfg.AllowAdmin)
	}
	if loopbackListen(cfg.AdminListen.IP) {
		return nil
	}
	for i, k := range cfg.AdminKey {
		if k.Key != LegacyAdminKey && k.Key != LegacyViewerKey {
			continue
		}
		return fmt.Errorf("%w: deployment.admin.admin_key[%d] (name %q) is the public key %s from APISIX's documentation, "+
			"and deployment.admin.admin_listen is %s, not a loopback address: "+
			"set a key of your own (an empty key has one generated at first start), or listen on 127.0.0.1",
			ErrLegacyKey, i, k.Name, k.Key, cfg.AdminListen.Addr())
	}
	return nil
}

// loopbackListen reports whether an admin_listen ip is loopback only
// ("" is every address).
func loopbackListen(ip string) bool {
	if ip == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(ip)
	return err == nil && a.IsLoopback()
}

func describeKeys(keys []nodeconf.AdminKey) string {
	if keys == nil {
		return "null"
	}
	return "empty"
}

// auth is deployment.admin's access rules, compiled once.
type auth struct {
	// keys is nil when no token is checked: admin_key_required false, or
	// admin_key null (APISIX checks nothing then either).
	keys  []keyEntry
	check bool
	// allow is allow_admin; empty lets every address in.
	allow []netip.Prefix
}

// keyEntry is one admin_key, kept as its SHA-256 so that comparing takes
// the same time whatever the token's length.
type keyEntry struct {
	digest [sha256.Size]byte
	viewer bool
}

func newAuth(cfg nodeconf.AdminConfig) (auth, error) {
	var a auth
	for _, s := range cfg.AllowAdmin {
		p, ok := spec.ParseIPOrCIDR(s)
		if !ok {
			return auth{}, fmt.Errorf("adminapi: deployment.admin.allow_admin: %q is not an IP address or CIDR", s)
		}
		a.allow = append(a.allow, p)
	}
	a.check = cfg.AdminKeyRequired && cfg.AdminKey != nil
	for _, k := range cfg.AdminKey {
		if k.Key == "" {
			continue // to be generated at start-up; never matches
		}
		a.keys = append(a.keys, keyEntry{digest: sha256.Sum256([]byte(k.Key)), viewer: k.Role == "viewer"})
	}
	return a, nil
}

// allowed reports whether the client at remoteAddr ("ip:port") is inside
// allow_admin.
func (a *auth) allowed(remoteAddr string) bool {
	if len(a.allow) == 0 {
		return true
	}
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap().WithZone("")
	for _, p := range a.allow {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Token returns the request's key, in APISIX's order: the api_key query
// argument, the X-API-KEY header, the x_api_key cookie; found is false
// when it has none. The supervisor's status page reads its key so too.
func Token(r *http.Request) (key string, found bool) {
	if q := r.URL.Query(); q.Has("api_key") {
		return q.Get("api_key"), true
	}
	if v := r.Header.Values("X-API-KEY"); len(v) > 0 {
		return v[0], true
	}
	if c, err := r.Cookie("x_api_key"); err == nil {
		return c.Value, true
	}
	return "", false
}

// authorize checks the request's token; the reason is the 401 body's
// description when it fails.
func (a *auth) authorize(r *http.Request) (reason string, ok bool) {
	if !a.check {
		return "", true
	}
	tok, found := Token(r)
	if !found {
		return "missing apikey", false
	}
	d := sha256.Sum256([]byte(tok))
	match := -1
	for i := range a.keys {
		// Every key is compared, so that the time taken does not say which.
		if subtle.ConstantTimeCompare(d[:], a.keys[i].digest[:]) == 1 && match < 0 {
			match = i
		}
	}
	if match < 0 {
		return "wrong apikey", false
	}
	if a.keys[match].viewer && r.Method != http.MethodGet {
		return "invalid method for role viewer", false
	}
	return "", true
}
