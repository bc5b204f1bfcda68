package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"coregate/bench/cluster"
)

func main() {
	args := os.Args[1:]
	var err error
	if len(args) > 0 && args[0] == "scenarios" {
		err = scenariosCmd(args[1:])
	} else {
		err = runCmd(args)
	}
	if errors.Is(err, cluster.ErrFailed) {
		os.Exit(1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

func runCmd(args []string) (err error) {
	fs := flag.NewFlagSet("cluster", flag.ExitOnError)
	script := fs.String("script", "scripts/cluster.sh", "the script that brings the cluster up and down")
	short := fs.Bool("short", os.Getenv("CLUSTER") == "short", "fewer iterations and shorter phases (CLUSTER=short)")
	only := fs.String("run", "", "only these scenarios, comma-separated (propagation, ...)")
	keep := fs.Bool("keep", false, "keep the state directory (configs and logs of every member)")
	_ = fs.Parse(args)
	if os.Geteuid() != 0 {
		return errors.New("cluster: refused: needs root, to make network namespaces (nothing was run)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("cluster: refused: needs ip (iproute2) for ip netns (nothing was run)")
	}
	if err := exec.Command("ip", "netns", "list").Run(); err != nil {
		return fmt.Errorf("cluster: refused: ip netns does not work here: %v (nothing was run)", err)
	}
	sh, err := filepath.Abs(*script)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	state, err := os.MkdirTemp("", "coregate-cluster-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(state)
	}
	// A tag of this run's own: the namespaces of two runs never meet.
	tag := fmt.Sprintf("cgt%d", os.Getpid()%100000)
	env := append(os.Environ(), "CLUSTER_STATE="+state, "CLUSTER_TAG="+tag)
	script2 := func(limit time.Duration, arg string) error {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		cmd := exec.CommandContext(ctx, sh, arg)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, os.Stdout, os.Stderr
		return cmd.Run()
	}
	host, err := hostNet()
	if err != nil {
		return err
	}
	// down brings the cluster down and checks that it left nothing: no
	// process it recorded, no namespace of its tag, the host's interfaces
	// and addresses as they were before up.
	down := func() error {
		pids := recorded(state)
		if err := script2(2*time.Minute, "down"); err != nil {
			return fmt.Errorf("cluster: down: %v", err)
		}
		return leftOver(host, tag, pids)
	}

	// The whole run is bounded; interrupted, it stops the scenarios and
	// brings the cluster down before it exits.
	limit := 15 * time.Minute
	if *short {
		limit = 8 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sig:
			fmt.Fprintf(os.Stderr, "\ncluster: %v: stopping\n", s)
			cancel()
		case <-ctx.Done():
		}
	}()

	fmt.Printf("cluster: up (state %s, namespaces %s-*)\n", state, tag)
	t0 := time.Now()
	if err := script2(3*time.Minute, "up"); err != nil {
		if err2 := leftOver(host, tag, nil); err2 != nil {
			fmt.Fprintln(os.Stderr, err2)
		}
		return fmt.Errorf("cluster: up: %v (logs in %s/logs; -keep keeps them)", err, state)
	}
	defer func() {
		if err2 := down(); err2 != nil {
			fmt.Fprintln(os.Stderr, err2)
			if err == nil {
				err = cluster.ErrFailed
			}
		}
	}()
	fmt.Printf("cluster: up in %v\n", time.Since(t0).Round(time.Millisecond))
	if now, err := hostNet(); err != nil || now != host {
		return fmt.Errorf("cluster: up changed the host's own network namespace (%v):\nbefore:\n%s\nafter:\n%s", err, host, now)
	}

	// The scenarios run in the client namespace, the only place the
	// cluster's addresses can be reached from.
	iargs := []string{"netns", "exec", tag + "-client", self, "scenarios", "-script", sh, "-state", state}
	if *short {
		iargs = append(iargs, "-short")
	}
	if *only != "" {
		iargs = append(iargs, "-run", *only)
	}
	cmd := exec.Command("ip", iargs...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// ip netns exec became the scenarios' process: the same PID
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if ctx.Err() == context.DeadlineExceeded {
			return fmt.Errorf("cluster: still running after %v: stopped", limit)
		}
		return errors.New("cluster: interrupted")
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return cluster.ErrFailed // the table says which
	}
	return err
}

// scenariosCmd runs the scenarios against a cluster that is up; it runs
// in the cluster's client namespace.
func scenariosCmd(args []string) error {
	fs := flag.NewFlagSet("scenarios", flag.ExitOnError)
	script := fs.String("script", "scripts/cluster.sh", "the cluster's script")
	state := fs.String("state", "", "the cluster's state directory")
	short := fs.Bool("short", false, "fewer iterations")
	only := fs.String("run", "", "only these scenarios, comma-separated")
	_ = fs.Parse(args)
	e, err := cluster.LoadEnv(*script, *state)
	if err != nil {
		return err
	}
	// A terminal's Ctrl-C reaches this process too: the outer one stops it
	// (SIGTERM) and brings the cluster down, whatever state it is left in.
	signal.Ignore(syscall.SIGINT)
	var list []string
	if *only != "" {
		list = strings.Split(*only, ",")
	}
	_, err = cluster.Run(cluster.Options{Env: e, Short: *short, Out: os.Stdout}, list)
	return err
}

// hostNet describes the host's own network namespace: each interface's
// name, and each address with its interface.
func hostNet() (string, error) {
	var b strings.Builder
	for _, what := range []string{"link", "addr"} {
		out, err := exec.Command("ip", "-o", what, "show").Output()
		if err != nil {
			return "", fmt.Errorf("cluster: ip -o %s show: %v", what, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			switch {
			case what == "link" && len(f) >= 2:
				fmt.Fprintf(&b, "link %s\n", f[1])
			case what == "addr" && len(f) >= 4:
				fmt.Fprintf(&b, "addr %s %s %s\n", f[1], f[2], f[3])
			}
		}
	}
	return b.String(), nil
}

// recorded reads the PIDs the script recorded in state/pids.
func recorded(state string) []int {
	files, _ := filepath.Glob(filepath.Join(state, "pids", "*"))
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		var pid int
		if _, err2 := fmt.Sscan(string(b), &pid); err == nil && err2 == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// leftOver tells what a down left behind: a process of pids still
// running, a namespace of tag, a change to the host's namespace since
// host was taken.
func leftOver(host, tag string, pids []int) error {
	var left []string
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// a zombie has ended: its parent, not the script, reaps it
		if err == nil && !strings.Contains(string(b), ") Z ") {
			left = append(left, fmt.Sprintf("process %d", pid))
		}
	}
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return fmt.Errorf("cluster: ip netns list: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], tag+"-") {
			left = append(left, "namespace "+f[0])
		}
	}
	if now, err := hostNet(); err != nil || now != host {
		left = append(left, fmt.Sprintf("the host's namespace changed (%v):\n%s", err, now))
	}
	if len(left) > 0 {
		return fmt.Errorf("cluster: down left %s", strings.Join(left, ", "))
	}
	fmt.Printf("cluster: down left nothing: %d processes ended, no namespace %s-*, the host's namespace as before\n", len(pids), tag)
	return nil
}
