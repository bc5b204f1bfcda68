package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"coregate/bench/harness"
	"coregate/bench/soak"
)

func main() {
	args := os.Args[1:]
	cmd := "soak"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "soak", "chaos":
		err = runCmd(cmd, args)
	case "upstream":
		err = upstreamCmd(args)
	default:
		err = fmt.Errorf("soak: unknown subcommand %q (soak, chaos, upstream)", cmd)
	}
	if errors.Is(err, errFailed) {
		os.Exit(1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// errFailed: the run was made and its verdict is a failure (already printed).
var errFailed = errors.New("failed")

func runCmd(cmd string, args []string) error {
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	d := fs.Duration("d", 30*time.Minute, "soak: how long the load runs, warm-up included")
	coregate := fs.String("coregate", "bin/coregate", "the gateway binary")
	workers := fs.Int("workers", 2, "gateway worker processes")
	conns := fs.Int("c", 32, "client connections (slots), each with its own share of the mix")
	share := fs.Float64("load", 0, "share of the measured maximum rate (default 0.7 for soak, 0.5 for chaos)")
	rate := fs.Float64("rate", 0, "a fixed rate, req/s, instead of -load's share of a measured maximum (to compare two builds at the same load)")
	probe := fs.Duration("probe", 5*time.Second, "how long the closed-loop run that finds the maximum lasts")
	timeout := fs.Duration("timeout", 0, "a request not answered within this has failed (default 3s for soak, 1s for chaos)")
	keep := fs.Bool("keep", false, "keep the temporary directory (configs, logs and, for chaos, records.csv of every request)")
	_ = fs.Parse(args)
	if *share == 0 {
		*share = 0.7
		if cmd == "chaos" {
			*share = 0.5
		}
	}
	if *timeout == 0 {
		*timeout = 3 * time.Second
		if cmd == "chaos" {
			*timeout = time.Second
		}
	}
	if *rate < 0 {
		return fmt.Errorf("soak: -rate %v: want a rate above 0 (or 0 for -load's share)", *rate)
	}
	if *share <= 0 || *share > 1 {
		return fmt.Errorf("soak: -load %v: want 0 < load ≤ 1", *share)
	}
	if cmd == "soak" && *d < 30*time.Second {
		return fmt.Errorf("soak: -d %v: want at least 30s", *d)
	}
	bin, err := filepath.Abs(*coregate)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("soak: %w (make build)", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "coregate-"+cmd+"-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	// Interrupted: stop every child by its PID. The whole run is bounded too.
	limit := *d + 5*time.Minute
	if cmd == "chaos" {
		limit = 5 * time.Minute
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sig:
			fmt.Fprintf(os.Stderr, "\n%s: %v: stopping processes\n", cmd, s)
		case <-time.After(limit):
			fmt.Fprintf(os.Stderr, "\n%s: still running after %v: stopping processes\n", cmd, limit)
		}
		harness.StopAll()
		if !*keep {
			os.RemoveAll(dir)
		}
		os.Exit(2)
	}()
	o := soak.Options{Coregate: bin, Self: self, Dir: dir, Workers: *workers, Conns: *conns, Duration: *d,
		Share: *share, Rate: *rate, Probe: *probe, Timeout: *timeout, Out: os.Stdout}
	if *keep && cmd == "chaos" {
		o.Records = filepath.Join(dir, "records.csv")
	}
	defer harness.StopAll()
	if cmd == "chaos" {
		_, err := soak.RunChaos(o)
		if errors.Is(err, soak.ErrChaos) {
			return errFailed
		}
		return err
	}
	v, err := soak.RunSoak(o)
	if err != nil {
		return err
	}
	if !v.Passed() {
		return errFailed
	}
	return nil
}

func upstreamCmd(args []string) error {
	fs := flag.NewFlagSet("upstream", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on (loopback)")
	_ = fs.Parse(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return soak.Upstream(ctx, *listen, os.Stdout)
}
