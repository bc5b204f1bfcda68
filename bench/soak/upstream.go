package soak

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// Bodies the upstream serves: 1 KiB on every path but /big, 1 MiB there.
var (
	body1K = bytes.Repeat([]byte("1234567890abcdef"), 64)
	body1M = bytes.Repeat([]byte("1234567890abcdef"), 64<<10)
)

// BigPath is the path answered with 1 MiB.
const BigPath = "/big"

// Upstream serves on listen (host:port, port 0 for a free one) until ctx
// ends, and writes "listening ADDR" to out once it listens. Every request
// body is read and dropped; /big is answered with 1 MiB, every other path
// with 1 KiB. SIGUSR1 makes it answer 503 to everything, SIGUSR2 turns that
// off: the chaos run's "upstream answering 503". It runs as its own
// process (soak upstream) so that it can be killed and restarted.
func Upstream(ctx context.Context, listen string, out io.Writer) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	var failing atomic.Bool
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sig)
	go func() {
		for s := range sig {
			failing.Store(s == syscall.SIGUSR1)
		}
	}()
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			if failing.Load() {
				http.Error(w, "failing on purpose", http.StatusServiceUnavailable)
				return
			}
			b := body1K
			if r.URL.Path == BigPath {
				b = body1M
			}
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			_, _ = w.Write(b)
		}),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          nil,
	}
	fmt.Fprintln(out, "listening", ln.Addr())
	go func() {
		<-ctx.Done()
		c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(c)
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}
