package node

import (
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served only when ServePprof is called
	"strconv"
)

// ServePprof serves net/http/pprof for worker id on the port after addr's
// by id (worker 0, and the supervisor, on addr itself), until the process
// exits. An addr that is not host:port is logged and ignored.
func ServePprof(addr string, id int, log *slog.Logger) {
	host, port, err := net.SplitHostPort(addr)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil {
		log.Error("COREGATE_PPROF: want host:port", "value", addr)
		return
	}
	addr = net.JoinHostPort(host, strconv.Itoa(p+id))
	go func() {
		log.Info("pprof listening", "addr", addr)
		if err := http.ListenAndServe(addr, nil); err != nil {
			log.Error("pprof", "err", err)
		}
	}()
}
