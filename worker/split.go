package worker

import (
	"encoding/json"
	"fmt"

	"coregate/admin/spec"
	"coregate/plugins"
)

// splitEnv is plugins.Env.Upstreams during one compile: the snapshot's
// upstreams, compiled as the routes' are (upFor), and the inline upstreams
// of the plugins' configurations. It notes each upstream it gives, for the
// route being built to get a variant for it (take, splitRoutes). Used by
// compile's goroutine only.
type splitEnv struct {
	ups   map[string]*spec.Upstream
	upFor func(*spec.Upstream) (*upstream, error)
	ue    upstreamEnv
	snap  *Snapshot
	prev  *Snapshot
	// given are the upstreams given since the last take.
	given []*upstream
}

var _ plugins.Upstreams = (*splitEnv)(nil)

// ByID implements plugins.Upstreams.
func (e *splitEnv) ByID(id string) (plugins.Upstream, error) {
	su := e.ups[id]
	if su == nil {
		return nil, fmt.Errorf("%w: %s", plugins.ErrNoUpstream, id)
	}
	cu, err := e.upFor(su)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", id, err)
	}
	e.given = append(e.given, cu)
	return cu, nil
}

// Inline implements plugins.Upstreams: an upstream of the same JSON as one
// the build compiled already, or prev did, is that one (its balancer's
// state and its nodes' pools kept across a reload), as upFor keeps an
// upstream object's.
func (e *splitEnv) Inline(raw json.RawMessage) (plugins.Upstream, error) {
	key := string(raw)
	if cu := e.snap.inline[key]; cu != nil {
		e.given = append(e.given, cu)
		return cu, nil
	}
	var cu *upstream
	if e.prev != nil {
		if cu = e.prev.inline[key]; cu != nil && namesSSL(cu) {
			cu = nil // its ssl object may have changed
		}
	}
	if cu == nil {
		su, err := spec.DecodeUpstream(raw)
		if err != nil {
			return nil, err
		}
		if cu, err = compileUpstream(su, e.ue); err != nil {
			return nil, err
		}
	}
	if e.snap.inline == nil {
		e.snap.inline = map[string]*upstream{}
	}
	e.snap.inline[key] = cu
	addNodes(e.snap.nodes, cu)
	e.given = append(e.given, cu)
	return cu, nil
}

// take returns the upstreams given since the last take, and forgets them.
func (e *splitEnv) take() []*upstream {
	g := e.given
	e.given = nil
	return g
}

// splitRoutes makes rt's variants, one per upstream its plugins (and the
// global rules') may choose: rt with that upstream in place of its own, and
// its timeouts unless the route sets them (hasTimeout). nil when there is
// none. The caller puts it in rt's about, which the variants share.
func splitRoutes(rt *route, hasTimeout bool, lists ...[]*upstream) map[*upstream]*route {
	var m map[*upstream]*route
	for _, l := range lists {
		for _, cu := range l {
			if _, ok := m[cu]; ok {
				continue
			}
			if m == nil {
				m = map[*upstream]*route{}
			}
			v := new(route)
			*v = *rt
			v.up = cu
			if !hasTimeout {
				v.to = &cu.to
			}
			m[cu] = v
		}
	}
	return m
}
