package adminapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"

	"coregate/admin/store"
	"coregate/admin/store/etcdstore"
	"coregate/plugins"
	_ "coregate/plugins/proxyrewrite"    // for bench admin's routes
	_ "coregate/plugins/responserewrite" // for bench admin's routes
)

// BenchmarkPutRoute is an Admin API PUT of a new route as bench admin
// -plugins -upstreams puts its bulk (an upstream_id, proxy-rewrite and
// response-rewrite), on an etcd holding putRouteUpstreams upstreams and
// putRouteRoutes routes: through the etcd store over the embedded etcd's
// listener (grpc), as an external etcd is reached, and calling it in
// process (inprocess, etcdstore.Options.Embedded), as the node reaches
// the etcd it embeds. The handler is called directly, without a
// connection: the figures are the Admin API's and the store's, and the
// request's and recorder's few allocations.
//
// The etcd is in this process either way, so the process's CPU time
// (getrusage, reported as cpu-ns/op) counts the server's work as well
// as the client's, as the supervisor's CPU does; ns/op is mostly the
// wait for etcd's fsync of its log, and B/op and allocs/op count both
// sides' allocations too.
func BenchmarkPutRoute(b *testing.B) {
	for _, c := range []struct {
		name  string
		local bool
	}{{"grpc", false}, {"inprocess", true}} {
		b.Run(c.name, func(b *testing.B) {
			o := etcdstore.Options{
				Endpoints: etcdEndpoints,
				Prefix:    fmt.Sprintf("/b%d-%d/apisix", os.Getpid(), prefixN.Add(1)),
				Timeout:   etcdstore.DefaultTimeout, // deployment.etcd.timeout's default
			}
			if c.local {
				o.Embedded = etcdEmbedded
			}
			st, err := etcdstore.New(o)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			fillStore(b, st)
			h, err := New(Options{Store: st, Admin: testAdmin(), Plugins: plugins.Default})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				uri := fmt.Sprintf("/bulk/%d", i)
				body := fmt.Sprintf(`{"uri":%q,"plugins":{"proxy-rewrite":{"headers":{"set":{"X-Bench":"1"}}},"response-rewrite":{"headers":{"set":{"X-Route":%q}}}},"upstream_id":"u-%d"}`,
					uri, uri, i%putRouteUpstreams)
				req, err := http.NewRequestWithContext(ctx, http.MethodPut, fmt.Sprintf("http://127.0.0.1/apisix/admin/routes/bulk-%d", i), strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				req.RemoteAddr = "127.0.0.1:40000" // deployment.admin.allow_admin
				req.Header.Set("X-API-KEY", testKey)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusCreated {
					b.Fatalf("PUT: %d %s", w.Code, w.Body)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

const (
	putRouteUpstreams = 100
	putRouteRoutes    = 1000
)

// fillStore puts putRouteUpstreams upstreams u-<i> and putRouteRoutes
// routes r-<i> referring to them, straight into st.
func fillStore(b *testing.B, st store.Store) {
	b.Helper()
	ctx := context.Background()
	for i := range putRouteUpstreams {
		v := fmt.Appendf(nil, `{"id":"u-%d","type":"roundrobin","nodes":{"127.0.0.1:%d":1}}`, i, 10000+i)
		if _, _, err := st.Put(ctx, fmt.Sprintf("%s/upstreams/u-%d", st.Prefix(), i), v, store.PutOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range putRouteRoutes {
		v := fmt.Appendf(nil, `{"id":"r-%d","uri":"/r/%d","upstream_id":"u-%d"}`, i, i, i%putRouteUpstreams)
		if _, _, err := st.Put(ctx, fmt.Sprintf("%s/routes/r-%d", st.Prefix(), i), v, store.PutOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuTime is the CPU time this process has used, user and system, in
// nanoseconds.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
