package worker

import (
	"fmt"

	"coregate/admin/spec"
	"coregate/plugins"
)

// sslHasRefs reports whether a served object of ssls holds a reference
// (spec.IsReference) in its cert, key, certs, keys or client.ca.
func sslHasRefs(ssls []*spec.SSL) bool {
	for _, sl := range ssls {
		if sl.Served() && sslRefs(sl) {
			return true
		}
	}
	return false
}

func sslRefs(sl *spec.SSL) bool {
	if spec.IsReference(sl.Cert) || spec.IsReference(sl.Key) || sl.Client != nil && spec.IsReference(sl.Client.CA) {
		return true
	}
	for _, s := range sl.Certs {
		if spec.IsReference(s) {
			return true
		}
	}
	for _, s := range sl.Keys {
		if spec.IsReference(s) {
			return true
		}
	}
	return false
}

// resolveSSLs returns ssls with the references of its served objects
// replaced by their values (reg.Resolve: the process environment, the
// secret managers), as APISIX's fetch_secrets reads an ssl object before
// serving it, and one error for each object left out because a
// reference did not resolve, naming the object, the field and the
// reference, never a value. Objects without references are ssls' own;
// the others are copies, so that the Spec keeps what was written. It may
// read secret managers: it runs off the event loop, where snapshots are
// built.
func resolveSSLs(ssls []*spec.SSL, reg *plugins.Registry) ([]*spec.SSL, []error) {
	out := make([]*spec.SSL, 0, len(ssls))
	var errs []error
	for _, sl := range ssls {
		if !sl.Served() || !sslRefs(sl) {
			out = append(out, sl)
			continue
		}
		c := *sl
		var err error
		resolve := func(field string, s *string) {
			if err != nil {
				return
			}
			v, _, rerr := reg.Resolve(*s)
			if rerr != nil {
				err = fmt.Errorf("worker: ssl %s left out: %s: %w", sl.ID.String(), field, rerr)
				return
			}
			*s = v
		}
		resolve("cert", &c.Cert)
		resolve("key", &c.Key)
		c.Certs = append([]string(nil), sl.Certs...)
		c.Keys = append([]string(nil), sl.Keys...)
		for i := range c.Certs {
			resolve(fmt.Sprintf("certs[%d]", i), &c.Certs[i])
		}
		for i := range c.Keys {
			resolve(fmt.Sprintf("keys[%d]", i), &c.Keys[i])
		}
		if sl.Client != nil {
			cl := *sl.Client
			resolve("client.ca", &cl.CA)
			c.Client = &cl
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, &c)
	}
	return out, errs
}
