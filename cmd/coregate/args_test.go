package main

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestStrayArgumentRefused: a word that is not a flag (a subcommand that
// does not exist, a flag after one) is refused with exit status 1, where
// it used to be ignored and a gateway started with the defaults.
func TestStrayArgumentRefused(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"nosuchcommand"}, {"-c", "config.yaml", "reload"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cmd := exec.CommandContext(ctx, binPath, args...)
		cmd.Dir = t.TempDir() // no conf/config.yaml to start from, were it read
		out, err := cmd.CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), `unexpected argument "`+args[len(args)-1]+`"`) {
			t.Errorf("coregate %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
