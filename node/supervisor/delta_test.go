package supervisor

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"coregate/admin/spec"
	"coregate/internal/syncbuf"
	"coregate/worker/control"
)

// fakeWorkerEnv names the file a test binary started as a worker (by
// TestMain) writes what it received to; with fakeWorkerRefuse set, it
// answers its first Delta as a worker that does not hold the base would.
const (
	fakeWorkerEnv    = "SUPERVISOR_TEST_WORKER_LOG"
	fakeWorkerRefuse = "SUPERVISOR_TEST_WORKER_REFUSE"
	// fakeWorkerBeats, set to N, makes the fake worker fall silent after
	// N heartbeats (its control socket stays open).
	fakeWorkerBeats = "SUPERVISOR_TEST_WORKER_BEATS"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(fakeWorkerEnv); path != "" {
		if err := fakeWorker(path, os.Getenv(fakeWorkerRefuse) != ""); err != nil {
			fmt.Fprintln(os.Stderr, "fake worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeWorker speaks the worker's side of the control protocol on fd 3:
// it decodes each Config and Delta as the worker does, answers Applied,
// and writes one line per frame to path: its type, and the route ids it
// then holds (or "resync").
func fakeWorker(path string, refuse bool) error {
	ctrl, err := control.FromFile(os.NewFile(3, "control"))
	if err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	beats := -1
	if n, err := strconv.Atoi(os.Getenv(fakeWorkerBeats)); err == nil {
		beats = n
	}
	go func() {
		for range time.Tick(control.StatsEvery) {
			if beats == 0 {
				return
			}
			beats--
			_ = ctrl.Send(control.Stats, control.StatsMsg{})
		}
	}()
	var held *spec.Spec
	ready := false
	for {
		t, payload, err := ctrl.Recv()
		if err != nil {
			return nil // the supervisor is gone
		}
		var s *spec.Spec
		name := "Config"
		switch t {
		case control.Config:
			s, err = control.DecodeSpec(payload, nil)
		case control.Delta:
			name = "Delta"
			if refuse {
				refuse, held = false, nil
			}
			s, err = control.DecodeDelta(payload, held, nil)
		case control.Drain:
			return nil
		default:
			continue
		}
		if err != nil {
			held = nil
			fmt.Fprintf(out, "%s resync\n", name)
			_ = ctrl.Send(control.Applied, control.AppliedMsg{Error: err.Error(), Resync: t == control.Delta})
			continue
		}
		held = s
		var ids []string
		for _, r := range s.Routes {
			ids = append(ids, r.ID.String())
		}
		fmt.Fprintf(out, "%s %s\n", name, strings.Join(ids, ","))
		_ = ctrl.Send(control.Applied, control.AppliedMsg{Routes: len(s.Routes)})
		if !ready {
			ready = true
			_ = ctrl.Send(control.Ready, control.ReadyMsg{PID: os.Getpid()})
		}
	}
}

// chanSource serves its first Spec, then each one sent on next.
type chanSource struct {
	first *spec.Spec
	next  chan *spec.Spec
}

func (c chanSource) Load() (*spec.Spec, error) { return c.first, nil }
func (c chanSource) Watch(ctx context.Context, onChange func(*spec.Spec), _ func(error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case sp := <-c.next:
			onChange(sp)
		}
	}
}

// TestConfigDeltas: a worker gets its first configuration whole and the
// next ones as Deltas; one that cannot apply a Delta gets the current
// configuration whole, and Deltas again after it.
func TestConfigDeltas(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("refuse=%v", refuse), func(t *testing.T) {
			route := func(id string) *spec.Route {
				r, err := spec.DecodeRoute([]byte(`{"id":"` + id + `","uri":"/` + id + `","upstream":{"nodes":{"127.0.0.1:1980":1}}}`))
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			// Each Spec keeps the objects of the one before, as the
			// configuration store's do.
			specs := []*spec.Spec{{Routes: []*spec.Route{route("a"), route("b")}}}
			for _, id := range []string{"c", "d"} {
				prev := specs[len(specs)-1]
				specs = append(specs, &spec.Spec{Routes: append(slices.Clone(prev.Routes), route(id))})
			}
			for _, s := range specs {
				s.SetHash()
			}
			logPath := t.TempDir() + "/frames"
			t.Setenv(fakeWorkerEnv, logPath)
			if refuse {
				t.Setenv(fakeWorkerRefuse, "1")
			}
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			src := chanSource{first: specs[0], next: make(chan *spec.Spec)}
			var logBuf syncbuf.Buffer
			s, err := New(Options{
				Exe: exe, Workers: 1, CPUs: []int{0}, Source: src,
				Log: slog.New(slog.NewTextHandler(&logBuf, nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx, nil) }()
			defer func() {
				cancel()
				select {
				case <-done:
				case <-time.After(15 * time.Second):
					t.Error("Run did not return")
				}
			}()
			frames := func() []string {
				b, _ := os.ReadFile(logPath)
				return strings.Fields(strings.ReplaceAll(string(b), " ", ":"))
			}
			waitFor := func(n int) {
				t.Helper()
				deadline := time.Now().Add(10 * time.Second)
				for len(frames()) < n {
					if time.Now().After(deadline) {
						t.Fatalf("the worker got %q, want %d frames\nlog:\n%s", frames(), n, logBuf.String())
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			waitFor(1)
			for _, sp := range specs[1:] {
				n := len(frames())
				src.next <- sp
				waitFor(n + 1)
				if refuse && n == 1 {
					waitFor(n + 2) // the whole configuration after the refused Delta
				}
			}
			want := []string{"Config:a,b", "Delta:a,b,c", "Delta:a,b,c,d"}
			if refuse {
				want = []string{"Config:a,b", "Delta:resync", "Config:a,b,c", "Delta:a,b,c,d"}
			}
			// Nothing more comes.
			time.Sleep(200 * time.Millisecond)
			if d := cmp.Diff(want, frames()); d != "" {
				t.Fatalf("frames (-want +got):\n%s\nlog:\n%s", d, logBuf.String())
			}
		})
	}
}

// TestPushDropsHeldConfig: a configuration pushed while an older one was
// held back (for the pace, or past maxHold for the workers' answers)
// replaces it; the held one never follows it. It did, once the push was
// answered: a bulk load through the Admin API saw 3000 routes, then 2979,
// then 3001.
func TestPushDropsHeldConfig(t *testing.T) {
	older, newer := &spec.Spec{}, &spec.Spec{Routes: []*spec.Route{{ID: spec.ID{Str: "r"}}}}
	older.SetHash()
	newer.SetHash()
	s := &Supervisor{log: slog.New(slog.NewTextHandler(&syncbuf.Buffer{}, nil)), next: older}
	s.push(newer)
	if s.spec != newer || s.next != nil {
		t.Fatalf("after the push of the newer configuration: serving %d routes, holding %v; want 1 route, nothing held", len(s.spec.Routes), s.next != nil)
	}
}
