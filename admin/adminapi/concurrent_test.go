package adminapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
)

// TestConcurrentWriters has several clients PUT, PATCH, POST and DELETE
// the same few routes and upstreams at once (run it with -race), then
// checks that every answer kept the invariant, that everything stored is
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
				req, _ := http.NewRequest(method, c.url+path, bytes.NewReader([]byte(body)))
				req.Header.Set("X-API-KEY", testKey)
				resp, err := c.http.Do(req)
				if err != nil {
					mu.Lock()
					problems = append(problems, err.Error())
					mu.Unlock()
					return
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				statuses[resp.StatusCode]++
				if err := checkAnswer(resp.StatusCode, out, true); err != nil {
					problems = append(problems, fmt.Sprintf("%s %s: %v", method, path, err))
				}
				if method == "POST" && resp.StatusCode == 201 {
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
