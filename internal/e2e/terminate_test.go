package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTerminate: a process that ends on SIGTERM is reaped at once; one
// that ignores SIGTERM is killed once the grace period is over, and
// reaped.
func TestTerminate(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	Terminate(cmd, 10*time.Second)
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if took := time.Since(start); took > 5*time.Second || !ok || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("sleep: %v after %v, want ended by SIGTERM at once", cmd.ProcessState, took)
	}

	// SIGTERM stays ignored across the exec.
	cmd = exec.Command("sh", "-c", `trap "" TERM; exec sleep 30`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 5*time.Second, func() error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
		if err != nil || !strings.HasPrefix(string(b), "sleep\x00") {
			return fmt.Errorf("not yet sleep: %q, %v", b, err)
		}
		return nil
	})
	start = time.Now()
	Terminate(cmd, 300*time.Millisecond)
	ws, ok = cmd.ProcessState.Sys().(syscall.WaitStatus)
	if took := time.Since(start); took < 300*time.Millisecond || !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("sleep ignoring SIGTERM: %v after %v, want killed after 300ms", cmd.ProcessState, took)
	}
}
