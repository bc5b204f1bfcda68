package spec

import (
	"time"
	"unsafe"
)

// CompatVersion is the APISIX release whose behaviour coregate follows; it
// is the <ver> of "Server: APISIX/<ver>".
const CompatVersion = "3.18.0"

// Defaults applied when a Spec is compiled (never written back into it).
const (
	DefaultKeepaliveSize     = 320
	DefaultKeepaliveIdle     = 60 * time.Second
	DefaultKeepaliveRequests = 1000
)

// The helpers below read a validated object and apply APISIX's schema
// defaults. They do not allocate unless noted, and are safe for concurrent
// use as long as nobody writes the object.

// Enabled reports whether the route takes traffic: status absent or 1.
func (r *Route) Enabled() bool { return r.Status == nil || *r.Status == 1 }

// EffectivePriority is the route's priority, 0 when absent.
func (r *Route) EffectivePriority() int {
	if r.Priority == nil {
		return 0
	}
	return *r.Priority
}

// AllURIs returns uris, or uri as a one-item list. The slice is the route's
// own: uris, or a view of its uri field (no copy: a worker keeps this
// list for each of its routes, 16 bytes a route where it was new each
// time); callers must not modify it.
func (r *Route) AllURIs() []string {
	if e := r.Extra; e != nil && e.URIs != nil {
		return e.URIs
	}
	if r.URI != "" {
		return unsafe.Slice(&r.URI, 1)
	}
	return nil
}

// AllHosts returns the route's own hosts, or host as a one-item list, or
// nil (a service's hosts are the caller's to apply). Callers must not
// modify the slice.
func (r *Route) AllHosts() []string {
	if r.Hosts != nil {
		return r.Hosts
	}
	if r.Host != "" {
		return []string{r.Host}
	}
	return nil
}

// AllRemoteAddrs returns remote_addrs, or remote_addr as a one-item list,
// or nil. Callers must not modify the slice.
func (r *Route) AllRemoteAddrs() []string {
	x := r.Rare()
	if x.RemoteAddrs != nil {
		return x.RemoteAddrs
	}
	if x.RemoteAddr != "" {
		return []string{x.RemoteAddr}
	}
	return nil
}

// EffectiveRetries is retries, or, when unset, the number of nodes − 1
// (never below 0), as APISIX does.
func (u *Upstream) EffectiveRetries() int {
	if u.Rare().Retries != nil {
		return *u.Rare().Retries
	}
	return max(len(u.Nodes.List)-1, 0)
}

// EffectiveKeepalive is the keep-alive pool setting with APISIX's defaults
// for what is unset: size 320, idle timeout 60 s, 1000 requests.
func (u *Upstream) EffectiveKeepalive() (size int, idle time.Duration, requests int) {
	size, idle, requests = DefaultKeepaliveSize, DefaultKeepaliveIdle, DefaultKeepaliveRequests
	if k := u.Rare().KeepalivePool; k != nil {
		if k.Size != nil {
			size = *k.Size
		}
		if k.IdleTimeout != nil {
			idle = time.Duration(*k.IdleTimeout * float64(time.Second))
		}
		if k.Requests != nil {
			requests = *k.Requests
		}
	}
	return size, idle, requests
}

// EffectiveType is the balancer type, "roundrobin" when unset.
func (u *Upstream) EffectiveType() string {
	if u.Type == "" {
		return "roundrobin"
	}
	return u.Type
}

// EffectiveScheme is the upstream scheme, "http" when unset.
func (u *Upstream) EffectiveScheme() string {
	if u.Rare().Scheme == "" {
		return "http"
	}
	return u.Rare().Scheme
}

// EffectivePassHost is pass_host, "pass" when unset.
func (u *Upstream) EffectivePassHost() string {
	if u.Rare().PassHost == "" {
		return "pass"
	}
	return u.Rare().PassHost
}

// EffectiveHashOn is hash_on, "vars" when unset.
func (u *Upstream) EffectiveHashOn() string {
	if u.Rare().HashOn == "" {
		return "vars"
	}
	return u.Rare().HashOn
}
