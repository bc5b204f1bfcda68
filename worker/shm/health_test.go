package shm

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

func newHealth(t *testing.T, slots int) *HealthSegment {
	t.Helper()
	s, err := CreateHealth(slots)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestHealthStateMachine: lua-resty-healthcheck's counting: a report that
// agrees with the state is not counted, a success clears the failures and
// a failure the successes, the threshold flips the state and clears every
// counter, a threshold of 0 counts nothing.
func TestHealthStateMachine(t *testing.T) {
	s := newHealth(t, 0)
	n := s.Node(HealthKey("/apisix/upstreams/1", "127.0.0.1:80"))
	if n == nil || !n.Healthy() {
		t.Fatal("a new node is not healthy")
	}
	if n.Report(Success, 2) {
		t.Fatal("a success flipped a healthy node")
	}
	if c, _, _, _ := n.Counters(); c != 0 {
		t.Fatalf("a success on a healthy node was counted: %d", c)
	}
	if n.Report(HTTPFailure, 0) {
		t.Fatal("a threshold of 0 flipped the node")
	}
	if n.Report(HTTPFailure, 3) || n.Report(TCPFailure, 3) || n.Report(HTTPFailure, 3) {
		t.Fatal("flipped before the threshold")
	}
	if _, h, tc, _ := n.Counters(); h != 2 || tc != 1 {
		t.Fatalf("counters http %d tcp %d, want 2 1", h, tc)
	}
	if !n.Report(HTTPFailure, 3) || n.Healthy() {
		t.Fatal("the third HTTP failure did not make the node unhealthy")
	}
	if a, b, c, d := n.Counters(); a+b+c+d != 0 || n.Changes() != 1 {
		t.Fatalf("after the flip: counters %d %d %d %d changes %d", a, b, c, d, n.Changes())
	}
	if n.Report(Timeout, 1) {
		t.Fatal("a failure flipped an unhealthy node")
	}
	// A failure between successes starts them again.
	n.Report(Success, 2)
	n.Report(Timeout, 9)
	if su, _, _, to := n.Counters(); su != 0 || to != 0 {
		t.Fatalf("after success, timeout: successes %d timeouts %d, want 0 0", su, to)
	}
	if n.Report(Success, 2) || !n.Report(Success, 2) || !n.Healthy() {
		t.Fatal("two successes did not make the node healthy")
	}
	// The same key finds the same slot; another, another.
	if s.Node(HealthKey("/apisix/upstreams/1", "127.0.0.1:80")) != n {
		t.Fatal("a key found two slots")
	}
	if m := s.Node(HealthKey("/apisix/upstreams/1", "127.0.0.1:81")); m == n || m == nil {
		t.Fatal("two keys share a slot")
	}
	n.Report(TCPFailure, 1)
	n.Reset()
	if !n.Healthy() || n.Changes() != 4 {
		t.Fatalf("Reset: healthy %v changes %d", n.Healthy(), n.Changes())
	}
	var nilNode *HealthNode
	if !nilNode.Healthy() || nilNode.Report(TCPFailure, 1) {
		t.Fatal("a nil node is not an unchecked one")
	}
}

// TestHealthFull: a region of 2 slots holds 2 nodes; a third gets nil
// (not checked), never another's slot.
func TestHealthFull(t *testing.T) {
	s := newHealth(t, 2)
	a, b := s.Node("a"), s.Node("b")
	if a == nil || b == nil || a == b {
		t.Fatal("two nodes do not fit two slots")
	}
	if c := s.Node("c"); c != nil {
		t.Fatal("a third node got a slot")
	}
	if _, err := CreateHealth(MaxHealthSlots + 1); err == nil {
		t.Fatal("an oversized region was made")
	}
}

// TestHealthRace: goroutines reporting failures and successes at once,
// readers reading, under -race: every state a reader sees is one a
// writer stored, and the counters stay under their thresholds.
func TestHealthRace(t *testing.T) {
	s := newHealth(t, 0)
	n := s.Node("k")
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20000 {
				if (i+g)%3 == 0 {
					n.Report(Success, 5)
				} else {
					n.Report(Report(1+i%3), 5)
				}
			}
		}()
	}
	stop := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for {
			select {
			case <-stop:
				return
			default:
			}
			a, b, c, d := n.Counters()
			if a >= 5 || b >= 5 || c >= 5 || d >= 5 {
				errs <- fmt.Errorf("counters %d %d %d %d reached a threshold", a, b, c, d)
				return
			}
			_ = n.Healthy()
		}
	}()
	wg.Wait()
	close(stop)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

const healthChildEnv = "SHM_TEST_HEALTH_CHILD"

// healthChild maps the region of fd 3, looks its argument's key up,
// reports what the argument says ("fail KEY": 3 TCP failures, threshold
// 3; "read KEY") and prints the node's state: a key not found is a node
// not checked, healthy.
func healthChild(arg string) error {
	h, err := OpenHealth(os.NewFile(3, "health"))
	if err != nil {
		return err
	}
	f := strings.Fields(arg)
	n := h.Lookup(f[1])
	if n == nil && f[0] == "fail" {
		return fmt.Errorf("no slot for %s", f[1])
	}
	if f[0] == "fail" {
		for range 3 {
			n.Report(TCPFailure, 3)
		}
	}
	fmt.Println(n.Healthy())
	return nil
}

// TestHealthProcesses: a node the creator claimed and a child process
// marks unhealthy is seen so by the creator and by another child, one the
// creator marks healthy again is seen so by a child, and one the creator
// frees is not found (not checked).
func TestHealthProcesses(t *testing.T) {
	s := newHealth(t, 0)
	n := s.Node("/apisix/upstreams/9#10.0.0.1:80")
	run := func(arg string) string {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), healthChildEnv+"="+arg)
		cmd.ExtraFiles = []*os.File{s.File()}
		cmd.Stderr = os.Stderr
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("child %q: %v", arg, err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := run("fail /apisix/upstreams/9#10.0.0.1:80"); got != "false" {
		t.Fatalf("the child sees its node healthy: %s", got)
	}
	if s.Node("/apisix/upstreams/9#10.0.0.1:80") != n || n.Healthy() {
		t.Fatal("the creator sees the node the child failed healthy")
	}
	if got := run("read /apisix/upstreams/9#10.0.0.1:80"); got != "false" {
		t.Fatalf("another child sees the node healthy: %s", got)
	}
	if got := run("read /apisix/upstreams/9#10.0.0.2:80"); got != "true" {
		t.Fatalf("another node is unhealthy: %s", got)
	}
	n.Report(Success, 1)
	if got := run("read /apisix/upstreams/9#10.0.0.1:80"); got != "true" {
		t.Fatalf("a child sees the node made healthy unhealthy: %s", got)
	}
	n.Report(TCPFailure, 1)
	s.Free(n)
	if got := run("read /apisix/upstreams/9#10.0.0.1:80"); got != "true" {
		t.Fatalf("a child finds a freed node, unhealthy: %s", got)
	}
}

// TestHealthFree: a freed slot is a tombstone that lookups pass over, so
// the keys claimed past it in its chain are still found; a claim takes it
// again, healthy and with its counters cleared; a region of 4 slots holds
// any number of nodes over time, 4 at once.
func TestHealthFree(t *testing.T) {
	s := newHealth(t, 4)
	// Keys whose chains start at the same slot, so that each is stored
	// past the one before.
	var same []string
	first := digest("k0")[0] & s.mask
	for i := 0; len(same) < 4; i++ {
		if k := fmt.Sprint("k", i); digest(k)[0]&s.mask == first {
			same = append(same, k)
		}
	}
	a, b, c := s.Node(same[0]), s.Node(same[1]), s.Node(same[2])
	if a == nil || b == nil || c == nil || a == b || b == c {
		t.Fatal("three keys of one chain did not get three slots")
	}
	c.Report(TCPFailure, 1)
	a.Report(TCPFailure, 1)
	s.Free(a)
	s.Free(b)
	if s.Lookup(same[0]) != nil || s.Lookup(same[1]) != nil {
		t.Fatal("a freed key is found")
	}
	if s.Lookup(same[2]) != c || c.Healthy() {
		t.Fatal("a key stored past two tombstones is not found, or lost its state")
	}
	if s.Node(same[2]) != c {
		t.Fatal("claiming a stored key past tombstones claimed it again")
	}
	// The first tombstone of the chain is claimed again.
	d := s.Node(same[3])
	if d != a || !d.Healthy() || s.Lookup(same[3]) != d || s.Lookup(same[0]) != nil {
		t.Fatal("the chain's first tombstone was not claimed again, healthy, for the new key only")
	}
	s.Free(c)
	s.Free(d)
	s.Free(s.Lookup(same[1])) // nil: ignored
	for round := range 50 {
		var held []*HealthNode
		for i := range 4 {
			k := fmt.Sprint("r", round, "n", i)
			n := s.Node(k)
			if n == nil {
				t.Fatalf("round %d: node %d of 4 got no slot", round, i)
			}
			if a, b, c, d := n.Counters(); !n.Healthy() || a+b+c+d != 0 {
				t.Fatalf("round %d: a slot claimed again kept its old state", round)
			}
			n.Report(TCPFailure, 1)
			held = append(held, n)
		}
		if s.Node("fifth") != nil {
			t.Fatalf("round %d: a fifth node got a slot of 4", round)
		}
		for i, n := range held {
			if s.Lookup(fmt.Sprint("r", round, "n", i)) != n {
				t.Fatalf("round %d: node %d not found", round, i)
			}
			s.Free(n)
		}
	}
}
