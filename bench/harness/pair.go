package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"coregate/bench/procstat"
	"coregate/bench/report"
	"coregate/bench/scenario"
)

// PairSide is one gateway's round of a pair.
type PairSide struct {
	CPUns    float64 // CPU ns per request, every thread of the gateway's processes (schedstat)
	Requests uint64
	P99      float64 // ms
}

// Pair is one round of each gateway, back to back.
type Pair struct {
	A, B   PairSide
	AFirst bool
}

// Ratio is A's CPU per request over B's.
func (p Pair) Ratio() float64 { return p.A.CPUns / p.B.CPUns }

// PairReport is the result of Runner.Pair: coregate (A) against a
// reference (B), in rounds taken in turn.
type PairReport struct {
	Scenario string
	Rate     float64 // 0: closed loop
	A, B     string  // what each side ran
	Pairs    []Pair
}

// Median is the median over the pairs of A's CPU per request over B's.
func (r *PairReport) Median() float64 {
	v := make([]float64, len(r.Pairs))
	for i, p := range r.Pairs {
		v[i] = p.Ratio()
	}
	return report.MedianOf(v)
}

// Lower counts the pairs in which A cost less per request than B.
func (r *PairReport) Lower() int {
	n := 0
	for _, p := range r.Pairs {
		if p.A.CPUns < p.B.CPUns {
			n++
		}
	}
	return n
}

// P99 returns the medians over the pairs of A's and of B's p99, in ms.
func (r *PairReport) P99() (a, b float64) {
	va, vb := make([]float64, len(r.Pairs)), make([]float64, len(r.Pairs))
	for i, p := range r.Pairs {
		va[i], vb[i] = p.A.P99, p.B.P99
	}
	return report.MedianOf(va), report.MedianOf(vb)
}

// ABFirst reports whether pair i (from 0) loads A before B: A B, B A, A B,
// ... so that neither side always runs first, after the other has warmed
// or disturbed the machine (ABBA).
func ABFirst(i int) bool { return i%2 == 0 }

// Pair measures coregate (Options.Coregate) against a reference on the
// same CPUs: nginx (Options.Nginx) when against is "", otherwise the
// coregate binary at against; either side may be PairFloor. Both listen
// at once, one worker each on Options.GatewayCPUs, and are loaded in turn,
// pairs pairs of rounds of Options.Duration each, ABBA. A difference of a
// few per cent, which the machine's drift between two minutes exceeds,
// shows as the median of the pairs' ratios: each pair's two rounds are
// seconds apart. Every round must be free of errors and non-2xx answers.
// Processes are stopped before it returns.
func (r *Runner) Pair(s scenario.Scenario, pairs int, against string) (*PairReport, error) {
	defer StopAll()
	o := r.o
	switch {
	case o.Coregate == "":
		return nil, ErrNoTarget
	case against == "" && o.Nginx == "":
		return nil, errors.New("harness: pair: no nginx to pair with")
	case !slices.Equal(s.Workers, []int{1}):
		return nil, fmt.Errorf("harness: pair: scenario %s runs %v workers; pairs are of one worker each", s.Name, s.Workers)
	case pairs < 1:
		return nil, errors.New("harness: pair: at least one pair")
	}
	if err := r.startLoadAndUpstream(); err != nil {
		return nil, err
	}
	var err error
	if s.Redis {
		if s.RedisPort, err = r.startRedis(); err != nil {
			return nil, err
		}
	}
	if s.Balancer != "" {
		if s.Upstream2, err = r.startUpstream2(); err != nil {
			return nil, err
		}
	}
	if s, err = s.WithJWTKey(); err != nil {
		return nil, err
	}
	a, err := r.startPairSide(s, o.Coregate, report.Coregate)
	if err != nil {
		return nil, err
	}
	var b *target
	rep := &PairReport{Scenario: s.Name, Rate: s.Load.Rate, A: o.Coregate}
	if against == "" {
		b, err = r.startNginx(s, 1, o.GatewayCPUs, report.Nginx)
		rep.B = o.Nginx
	} else {
		b, err = r.startPairSide(s, against, "coregate-b")
		rep.B = against
	}
	if err != nil {
		return nil, err
	}
	for _, t := range []*target{a, b} {
		if err := r.ready(s, t); err != nil {
			return nil, fmt.Errorf("harness: pair: %s: %w", t.name, err)
		}
		if _, err := r.pairRound(s, t, o.Warmup); err != nil {
			return nil, err
		}
	}
	for i := range pairs {
		var p Pair
		p.AFirst = ABFirst(i)
		first, second := a, b
		if !p.AFirst {
			first, second = b, a
		}
		x, err := r.pairRound(s, first, o.Duration)
		if err != nil {
			return rep, err
		}
		y, err := r.pairRound(s, second, o.Duration)
		if err != nil {
			return rep, err
		}
		if p.AFirst {
			p.A, p.B = x, y
		} else {
			p.A, p.B = y, x
		}
		rep.Pairs = append(rep.Pairs, p)
		r.logf("pair %2d: A %6.0f  B %6.0f ns/req  A/B %.3f  (p99 A %.3f, B %.3f ms)\n",
			i+1, p.A.CPUns, p.B.CPUns, p.Ratio(), p.A.P99, p.B.P99)
	}
	return rep, nil
}

// PairFloor, given as either side's binary, pairs the I/O floor
// (bench/floor on epoll, as "bench run -floor" measures it) instead of a
// coregate build: how much of a gateway's cost per request any proxy pays
// on the machine for the same I/O.
const PairFloor = "floor"

// startPairSide starts a side of a pair: the coregate binary bin as name,
// or the I/O floor when bin is PairFloor (a plain proxy's scenarios only).
func (r *Runner) startPairSide(s scenario.Scenario, bin, name string) (*target, error) {
	if bin != PairFloor {
		return r.startCoregateBin(bin, name, s, 1, r.o.GatewayCPUs)
	}
	if !floorScenario(s) {
		return nil, fmt.Errorf("harness: pair: the I/O floor serves no-plugin and latency only, not %s", s.Name)
	}
	return r.startFloor(s, false)
}

// pairRound loads t for d and returns its CPU per request over that time.
func (r *Runner) pairRound(s scenario.Scenario, t *target, d time.Duration) (PairSide, error) {
	if t.proc.Exited() {
		return PairSide{}, fmt.Errorf("%w: %s: %s", ErrExited, t.name, t.proc.Tail(20))
	}
	pids := t.proc.PIDs()
	before := procstat.RunNS(pids)
	res, bg, err := r.drive(s, t, d, nil)
	after := procstat.RunNS(pids)
	switch {
	case err != nil:
		return PairSide{}, fmt.Errorf("harness: pair: load %s: %w", t.name, err)
	case res.Requests == 0 || res.Errors+bg.Errors != 0 || res.Non2xx+bg.Non2xx != 0:
		return PairSide{}, fmt.Errorf("harness: pair: %s: %d requests, %d errors, %d non-2xx", t.name, res.Requests,
			res.Errors+bg.Errors, res.Non2xx+bg.Non2xx)
	}
	return PairSide{
		CPUns:    float64(after-before) / float64(res.Requests+bg.Requests),
		Requests: res.Requests,
		P99:      float64(res.Latency.MustQuantile(0.99)) / 1e6,
	}, nil
}

// startCoregateBin starts the coregate binary bin as target name.
func (r *Runner) startCoregateBin(bin, name string, s scenario.Scenario, w int, cpus []int) (*target, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(r.o.WorkDir, fmt.Sprintf("%s-%s-w%d", name, s.Name, w))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s, tlsAddr, err := r.withTLS(s)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), scenario.CoregateConfig(s, port, w), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "apisix.yaml"), scenario.CoregateRoutes(s, r.upAddr), 0o644); err != nil {
		return nil, err
	}
	var env []string
	if r.o.Pprof != "" {
		env = append(env, "COREGATE_PPROF="+r.o.Pprof)
	}
	p, _, err := Start(name, cpus, env, filepath.Join(dir, "coregate.log"), false, bin, "-c", filepath.Join(dir, "config.yaml"))
	if err != nil {
		return nil, err
	}
	return &target{name: name, addr: fmt.Sprintf("127.0.0.1:%d", port), tlsAddr: tlsAddr, proc: p, workers: w, cpus: cpus}, nil
}
