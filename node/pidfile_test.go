package node

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPIDFile: the pid file holds this process's pid while it is held; a
// second holder is refused naming the file and the pid; -s's signal
// reaches the holder; Remove deletes it; a file left by a process that is
// gone is stale for SignalPIDFile and replaced by CreatePIDFile.
func TestPIDFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "coregate.pid")
	p, stale, err := CreatePIDFile(path)
	if err != nil || stale {
		t.Fatalf("CreatePIDFile: %v, stale %v", err, stale)
	}
	if b, _ := os.ReadFile(path); string(b) != strconv.Itoa(os.Getpid())+"\n" {
		t.Errorf("pid file holds %q", b)
	}
	if !PIDFileHeld(path) {
		t.Error("PIDFileHeld: false while held")
	}
	_, _, err = CreatePIDFile(path)
	if !errors.Is(err, ErrPIDFileHeld) || !strings.Contains(err.Error(), path+" holds pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("a second CreatePIDFile: %v", err)
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	if pid, err := SignalPIDFile(path, syscall.SIGUSR1); err != nil || pid != os.Getpid() {
		t.Errorf("SignalPIDFile: %d, %v", pid, err)
	}
	select {
	case <-usr1:
	case <-time.After(5 * time.Second):
		t.Error("SIGUSR1 not received")
	}
	p.Remove()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("after Remove: %v", err)
	}
	if _, err := SignalPIDFile(path, syscall.SIGUSR1); err == nil || !strings.Contains(err.Error(), path+" does not exist") {
		t.Errorf("SignalPIDFile of no file: %v", err)
	}

	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(gone.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if PIDFileHeld(path) {
		t.Error("PIDFileHeld: true of a stale file")
	}
	if _, err := SignalPIDFile(path, syscall.SIGUSR1); err == nil || !strings.Contains(err.Error(), path+" is stale") {
		t.Errorf("SignalPIDFile of a stale file: %v", err)
	}
	p, stale, err = CreatePIDFile(path)
	if err != nil || !stale {
		t.Fatalf("CreatePIDFile over a stale file: %v, stale %v", err, stale)
	}
	defer p.Remove()
	if b, _ := os.ReadFile(path); string(b) != strconv.Itoa(os.Getpid())+"\n" {
		t.Errorf("pid file holds %q after replacing a stale one", b)
	}
	if err := os.WriteFile(path+".bad", []byte("nope\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := SignalPIDFile(path+".bad", syscall.SIGUSR1); err == nil || !strings.Contains(err.Error(), `"nope" is not a pid`) {
		t.Errorf("SignalPIDFile of garbage: %v", err)
	}
}
