package adminapi

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"coregate/admin/store"
)

// TestConcurrentWriters has several clients PUT, PATCH, POST and DELETE
// the same few routes and upstreams at once (run it with -race), then
// checks that every answer kept the invariant (no 503 for a write that
// lost to another: it is tried again), that everything stored is
// valid, and that the list's total is what the store holds.
func TestConcurrentWriters(t *testing.T) {
	c := newTestServer(t)
	c.want(c.do("PUT", "/apisix/admin/upstreams/u", upstream1), 201, "")
	const writers, ops = 6, 30
	ops1 := []func(r *rand.Rand) (string, string, string){
		func(r *rand.Rand) (string, string, string) {
			return "PUT", fmt.Sprintf("/apisix/admin/routes/%d", r.IntN(3)),
				fmt.Sprintf(`{"uri":"/r%d","upstream_id":"u","methods":["GET"]}`, r.IntN(100))
		},
		func(r *rand.Rand) (string, string, string) {
			return "PUT", fmt.Sprintf("/apisix/admin/routes/%d", r.IntN(3)), `{"uri":"/bad","methods":["NOPE"]}`
		},
		func(r *rand.Rand) (string, string, string) {
			return "PATCH", fmt.Sprintf("/apisix/admin/routes/%d", r.IntN(3)),
				fmt.Sprintf(`{"desc":"d%d","methods":null,"labels":{"w":"%d"}}`, r.IntN(100), r.IntN(100))
		},
		func(r *rand.Rand) (string, string, string) {
			return "PATCH", fmt.Sprintf("/apisix/admin/routes/%d/upstream", r.IntN(3)), `{"nodes":{"127.0.0.1:7":1}}`
		},
		func(r *rand.Rand) (string, string, string) {
			return "DELETE", fmt.Sprintf("/apisix/admin/routes/%d", r.IntN(3)), ""
		},
		func(r *rand.Rand) (string, string, string) {
			return "POST", "/apisix/admin/routes", `{"uri":"/posted","upstream_id":"u"}`
		},
		func(r *rand.Rand) (string, string, string) {
			return "PATCH", "/apisix/admin/upstreams/u", fmt.Sprintf(`{"nodes":{"127.0.0.1:%d":1}}`, 1+r.IntN(9))
		},
	}
	var (
		mu       sync.Mutex
		problems []string
		posted   int
		statuses = map[int]int{}
	)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for range ops {
				method, path, body := ops1[r.IntN(len(ops1))](r)
				resp, err := c.tryDo(method, path, body)
				if err != nil {
					mu.Lock()
					problems = append(problems, err.Error())
					mu.Unlock()
					return
				}
				mu.Lock()
				statuses[resp.status]++
				if err := checkAnswer(resp.status, resp.body); err != nil {
					problems = append(problems, fmt.Sprintf("%s %s: %v", method, path, err))
				}
				if method == "POST" && resp.status == 201 {
					posted++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("statuses %v", statuses)

	for _, dir := range []string{"routes", "upstreams"} {
		kvs, _, err := c.st.List(t.Context(), c.st.Prefix()+"/"+dir+"/")
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range kvs {
			if err := validStored(kv.Key, c.st.Prefix(), kv.Value); err != nil {
				t.Errorf("%s: stored %s, which the gateway refuses: %v", kv.Key, kv.Value, err)
			}
		}
		r := c.do("GET", "/apisix/admin/"+dir, "")
		var l struct {
			List  []json.RawMessage `json:"list"`
			Total int               `json:"total"`
		}
		if err := json.Unmarshal(r.body, &l); err != nil {
			t.Fatal(err)
		}
		if l.Total != len(kvs) || len(l.List) != len(kvs) {
			t.Errorf("%s: list total %d, %d items; the store holds %d", dir, l.Total, len(l.List), len(kvs))
		}
		if dir == "routes" && len(kvs) < posted {
			t.Errorf("%d routes stored, %d posted and never deleted", len(kvs), posted)
		}
	}
}

// TestConcurrentPutOneID: sixteen clients PUT the same route at once. A
// PUT is last-writer-wins, as in APISIX: every one is answered 200 or 201
// (201 once, for the write that created the key), none 503 "value changed
// before overwritten", and what is stored at the end is one of the
// objects written, with the create_time of the first.
func TestConcurrentPutOneID(t *testing.T) {
	c := newTestServer(t)
	const writers, puts = 16, 20
	var (
		mu       sync.Mutex
		problems []string
		statuses = map[int]int{}
		written  = map[string]bool{}
	)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range puts {
				desc := fmt.Sprintf("w%d-%d", w, i)
				resp, err := c.tryDo("PUT", "/apisix/admin/routes/1", `{"uri":"/a","desc":"`+desc+`","upstream":`+upstream1+`}`)
				if err != nil {
					mu.Lock()
					problems = append(problems, err.Error())
					mu.Unlock()
					return
				}
				mu.Lock()
				statuses[resp.status]++
				if resp.status != 200 && resp.status != 201 {
					problems = append(problems, fmt.Sprintf("PUT %s: %d %s", desc, resp.status, resp.body))
				}
				written[desc] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, p := range problems {
		t.Error(p)
	}
	if statuses[201] != 1 || statuses[200] != writers*puts-1 {
		t.Errorf("statuses %v, want one 201 and %d 200", statuses, writers*puts-1)
	}
	got := c.stored("/routes/1")
	if d, _ := got["desc"].(string); !written[d] {
		t.Errorf("stored %v, not one of the objects written", got)
	}
	if ct, ut := got["create_time"].(json.Number), got["update_time"].(json.Number); ct == "" || ct > ut {
		t.Errorf("create_time %v, update_time %v", ct, ut)
	}
}

// TestConcurrentPatchOneID: sixteen clients PATCH one route at once,
// each its own label. PATCH is a read-modify-write retried as a whole:
// every one is answered 200 and none is lost, so the route ends with
// every client's last label.
func TestConcurrentPatchOneID(t *testing.T) {
	c := newTestServer(t)
	c.want(c.do("PUT", "/apisix/admin/routes/1", `{"uri":"/a","upstream":`+upstream1+`}`), 201, "")
	const writers, patches = 16, 10
	var (
		mu       sync.Mutex
		problems []string
	)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range patches {
				resp, err := c.tryDo("PATCH", "/apisix/admin/routes/1", fmt.Sprintf(`{"labels":{"w%d":"%d"}}`, w, i))
				if err != nil {
					mu.Lock()
					problems = append(problems, err.Error())
					mu.Unlock()
					return
				}
				if resp.status != 200 {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("PATCH w%d %d: %d %s", w, i, resp.status, resp.body))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for _, p := range problems {
		t.Error(p)
	}
	labels, _ := c.stored("/routes/1")["labels"].(map[string]any)
	for w := range writers {
		if v := labels[fmt.Sprintf("w%d", w)]; v != fmt.Sprint(patches-1) {
			t.Errorf("label w%d = %v, want %d: a PATCH was lost", w, v, patches-1)
		}
	}
}

// TestRetryCAS: a compare-and-swap that keeps losing is tried again
// until the request's time is up, then answered 503 "value changed before
// overwritten"; any other answer ends the retries at once.
func TestRetryCAS(t *testing.T) {
	lost := storeError(store.ErrConflict)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	tries := 0
	start := time.Now()
	e := retryCAS(ctx, func() *apiError { tries++; return lost })
	if e != lost || tries < 5 || time.Since(start) < 300*time.Millisecond || time.Since(start) > 5*time.Second {
		t.Fatalf("answer %v after %d tries in %v", e, tries, time.Since(start))
	}
	tries = 0
	bad := badRequest("x")
	if e := retryCAS(t.Context(), func() *apiError {
		if tries++; tries < 3 {
			return lost
		}
		return bad
	}); e != bad || tries != 3 {
		t.Fatalf("answer %v after %d tries", e, tries)
	}
}
