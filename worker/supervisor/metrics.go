package supervisor

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"coregate/worker/spec"
)

// The node's own metrics, served on APISIX's export server
// (plugin_attr.prometheus: export_addr 127.0.0.1:9091, export_uri
// /apisix/prometheus/metrics). The values are kept in atomics the
// supervisor's loop updates and a scrape reads; nothing here touches a
// worker.
type nodeMetrics struct {
	live     atomic.Int64
	restarts atomic.Uint64
}

func (s *Supervisor) registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	host, _ := os.Hostname()
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "apisix_node_info",
		Help:        "Info of the gateway node.",
		ConstLabels: prometheus.Labels{"hostname": host, "version": spec.CompatVersion},
	})
	info.Set(1)
	sel := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "coregate_socket_selector",
		Help:        "What steers new connections to workers (1 for the one in use): ebpf, cbpf, kernel_hash or plain, and the eBPF mode.",
		ConstLabels: prometheus.Labels{"kind": s.selKind, "mode": s.opts.Mode.String()},
	})
	sel.Set(1)
	reg.MustRegister(info, sel,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "coregate_workers",
			Help: "Worker processes running now.",
		}, func() float64 { return float64(s.metrics.live.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "coregate_worker_restarts_total",
			Help: "Worker processes restarted after dying.",
		}, func() float64 { return float64(s.metrics.restarts.Load()) }),
	)
	return reg
}

// ServeMetrics serves the node's metrics on addr at path until ctx is done.
// It returns once listening (or failing to).
func (s *Supervisor) ServeMetrics(ctx context.Context, addr, path string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(path, promhttp.HandlerFor(s.registry(), promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics server", "err", err)
		}
	}()
	s.log.Info("metrics", "addr", l.Addr().String(), "path", path)
	return nil
}

// countLive refreshes the live-worker gauge from the slots.
func (s *Supervisor) countLive() {
	n := 0
	for _, p := range s.workers {
		if p.cmd != nil {
			n++
		}
	}
	s.metrics.live.Store(int64(n))
}
