package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// PIDFile is the supervisor's pid file (apisix.pid_file), created by
// CreatePIDFile and held, locked, until Remove. The lock (flock, released
// by the kernel when the process dies however it dies) is what says a
// supervisor is running: a file left by one killed with SIGKILL is
// stale, whatever process has its pid since. The descriptor is
// close-on-exec, so the workers do not hold the lock.
//
// A PIDFile is used by one goroutine.
type PIDFile struct {
	path string
	f    *os.File
}

// ErrPIDFileHeld: another running coregate holds the pid file.
var ErrPIDFileHeld = errors.New("node: pid file held by a running coregate")

// CreatePIDFile writes this process's pid to path (creating its
// directory) and locks it. A file another running coregate holds is
// refused (an error naming the file and its pid, matching
// ErrPIDFileHeld); a stale one is replaced, and stale says so.
func CreatePIDFile(path string) (p *PIDFile, stale bool, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, false, fmt.Errorf("node: pid file %s: %w", path, err)
	}
	var f *os.File
	for tries := 0; ; tries++ {
		var err error
		if f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
			return nil, false, fmt.Errorf("node: pid file %s: %w", path, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			old, _ := readPID(f)
			_ = f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, false, fmt.Errorf("%w: %s holds pid %d: another coregate runs with this configuration (coregate -s stop ends it)", ErrPIDFileHeld, path, old)
			}
			return nil, false, fmt.Errorf("node: pid file %s: locking: %w", path, err)
		}
		// The holder before may have removed the file between our open
		// and our lock: the lock is then on a file no one else sees.
		if same(f, path) {
			break
		}
		_ = f.Close()
		if tries == 3 {
			return nil, false, fmt.Errorf("node: pid file %s: replaced as it was locked, again and again", path)
		}
	}
	old, _ := readPID(f)
	stale = old != 0
	data := strconv.Itoa(os.Getpid()) + "\n"
	if err := f.Truncate(0); err != nil {
		_ = f.Close()
		return nil, false, fmt.Errorf("node: pid file %s: %w", path, err)
	}
	if _, err := f.WriteAt([]byte(data), 0); err != nil {
		_ = f.Close()
		return nil, false, fmt.Errorf("node: pid file %s: %w", path, err)
	}
	return &PIDFile{path: path, f: f}, stale, nil
}

// same reports whether the file open as f is still the one at path.
func same(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// Path is the pid file's path.
func (p *PIDFile) Path() string { return p.path }

// Remove deletes the pid file and releases its lock; the process is about
// to exit.
func (p *PIDFile) Remove() {
	_ = os.Remove(p.path)
	_ = p.f.Close()
}

// readPID reads the pid a pid file holds (0 when it is empty).
func readPID(f *os.File) (int, error) {
	buf := make([]byte, 32)
	n, err := f.ReadAt(buf, 0)
	if n == 0 && err != nil {
		return 0, nil
	}
	s := strings.TrimSpace(string(buf[:n]))
	if s == "" {
		return 0, nil
	}
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%q is not a pid", s)
	}
	return pid, nil
}

// PIDFileHeld reports whether a running coregate holds the pid file at
// path.
func PIDFileHeld(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) != nil
}

// Signals are the signals `coregate -s` sends the supervisor, by the
// name nginx -s gives them: reload re-reads config.yaml (SIGHUP); stop
// ends the node at once (SIGQUIT: coregate's fast stop); quit drains it
// (SIGTERM: coregate's graceful stop, --shutdown-timeout); reopen has the
// workers reopen their access logs (SIGUSR1). The signals are coregate's
// own, which differ from nginx's for stop and quit: the names keep
// nginx's meaning.
var Signals = map[string]syscall.Signal{
	"reload": syscall.SIGHUP,
	"stop":   syscall.SIGQUIT,
	"quit":   syscall.SIGTERM,
	"reopen": syscall.SIGUSR1,
}

// SignalPIDFile sends sig to the coregate whose pid file is path, and
// returns its pid. The errors name the file: missing (no coregate runs
// with this configuration, or it was started with another pid file), not
// a pid, or stale (no process holds its lock: the coregate that wrote it
// is gone).
func SignalPIDFile(path string, sig syscall.Signal) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("node: pid file %s does not exist: is coregate running with this configuration?", path)
		}
		return 0, fmt.Errorf("node: pid file %s: %w", path, err)
	}
	defer f.Close()
	pid, err := readPID(f)
	if err == nil && pid == 0 {
		err = errors.New("empty")
	}
	if err != nil {
		return 0, fmt.Errorf("node: pid file %s: %w", path, err)
	}
	// A shared lock taken is a lock nobody holds exclusively: stale.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		return 0, fmt.Errorf("node: pid file %s is stale: coregate pid %d is not running", path, pid)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return 0, fmt.Errorf("node: pid file %s: signalling pid %d: %w", path, pid, err)
	}
	return pid, nil
}
