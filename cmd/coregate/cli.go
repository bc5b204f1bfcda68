package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"coregate/admin/nodeconf"
	"coregate/admin/spec"
	"coregate/bpf"
	"coregate/node"

	"golang.org/x/sys/unix"
)

// version is coregate's release, stamped by the build
// (-ldflags "-X main.version=1.2.3"); "dev" otherwise. commit, stamped the
// same way (-X main.commit=...), overrides the revision go build records
// from the git tree.
var (
	version = "dev"
	commit  = ""
)

// printVersion is `coregate -v`: one line, as nginx -v.
func printVersion(w io.Writer) {
	fmt.Fprintf(w, "coregate version: coregate/%s (APISIX %s compatible)\n", version, spec.CompatVersion)
}

// printVersionLong is `coregate -V`: the version, the Go release and
// target, the commit and build flags go build recorded, and the socket
// selector this kernel lets this process load (bpf.Probe: a real eBPF
// selector built and discarded, nothing attached).
func printVersionLong(w io.Writer) {
	printVersion(w)
	fmt.Fprintf(w, "built by %s for %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	rev, at, modified := commit, "", false
	var flags []string
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if rev == "" {
					rev = s.Value
				}
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			case "-ldflags", "-gcflags", "-tags", "-trimpath", "-race", "CGO_ENABLED", "GOAMD64", "GOARM64":
				flags = append(flags, s.Key+"="+s.Value)
			}
		}
	}
	switch {
	case rev == "":
		fmt.Fprintln(w, "commit: unknown (built outside a git tree)")
	default:
		line := "commit: " + rev
		if at != "" {
			line += " (" + at + ")"
		}
		if modified {
			line += ", with uncommitted changes"
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "build flags: %s\n", strings.Join(flags, " "))
	kind, err := bpf.Probe()
	if kind == bpf.KindEBPF {
		fmt.Fprintln(w, "socket selector: ebpf (the sk_reuseport program loads on this kernel with this process's capabilities)")
		return
	}
	fmt.Fprintf(w, "socket selector: %s (eBPF not available to this process: %v)\n", kind, err)
}

// sendSignal is `coregate -s NAME`: the signal node.Signals names, sent to
// the supervisor whose pid file config.yaml at path names. A config.yaml
// that does not load is not reloaded (the node would refuse it); the
// other signals go through the default pid file then.
func sendSignal(path, name string, w io.Writer) error {
	sig, ok := node.Signals[name]
	if !ok {
		names := make([]string, 0, len(node.Signals))
		for n := range node.Signals {
			names = append(names, n)
		}
		slices.Sort(names)
		return fmt.Errorf("-s %s: want one of %s", name, strings.Join(names, ", "))
	}
	var pidFile string
	nc, _, err := nodeconf.Load(path)
	switch {
	case err == nil:
		pidFile = nc.APISIX.PIDFilePath(nc.Dir)
	case name == "reload":
		// The node would refuse it: say why now, and signal nothing.
		return fmt.Errorf("%w\ncoregate: -s reload: not sent", err)
	default:
		// A node is stopped, or its logs reopened, whatever its
		// config.yaml became since it started: through the default
		// pid file when config.yaml no longer reads.
		d := nodeconf.Default()
		d.Dir = filepath.Dir(path)
		pidFile = d.APISIX.PIDFilePath(d.Dir)
		fmt.Fprintf(w, "coregate: [warn] %v; using the default pid file %s\n", err, pidFile)
	}
	pid, err := node.SignalPIDFile(pidFile, sig)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "coregate: %s: sent %s to pid %d (%s)\n", name, unix.SignalName(sig), pid, pidFile)
	return nil
}

// runInit is `coregate init [path]`: config.yaml written at path (default
// conf/config.yaml, its directory created) with every key coregate reads
// and its default, commented (nodeconf.Template). A file already there is
// left alone: init refuses to overwrite it.
func runInit(args []string) error {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: coregate init [path]: write a config.yaml with every key and its default (path: conf/config.yaml)")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	path := "conf/config.yaml"
	switch fs.NArg() {
	case 0:
	case 1:
		path = fs.Arg(0)
	default:
		return fmt.Errorf("init: unexpected argument %q: coregate init [path]", fs.Arg(1))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("init: %s exists: remove it, or give another path", path)
		}
		return fmt.Errorf("init: %w", err)
	}
	if _, err := f.Write(nodeconf.Template()); err != nil {
		_ = f.Close()
		return fmt.Errorf("init: %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("init: %s: %w", path, err)
	}
	fmt.Fprintf(os.Stderr, "coregate: wrote %s (coregate -t -c %s checks it)\n", path, path)
	return nil
}
