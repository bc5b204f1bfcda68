package worker

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestTeeBodySockets: a route with proxy-mirror and file-logger's
// include_req_body, through a running worker on real sockets. A
// Content-Length body and a chunked one reach the upstream and the mirror
// intact, and are logged cut to max_req_body_bytes; a 2 MiB body gets
// the upstream's 200, the upstream all of it, the mirror nothing, and is
// logged cut too. The client's answer does not wait for the mirror.
func TestTeeBodySockets(t *testing.T) {
	type got struct {
		path string
		n    int
		sum  [32]byte
		te   string
	}
	var mu sync.Mutex
	var upGot, mirGot []got
	record := func(list *[]got, r *http.Request) got {
		b, _ := io.ReadAll(r.Body)
		g := got{r.URL.Path, len(b), sha256.Sum256(b), strings.Join(r.TransferEncoding, ",")}
		mu.Lock()
		*list = append(*list, g)
		mu.Unlock()
		return g
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := record(&upGot, r)
		fmt.Fprintf(w, "got %d", g.n)
	}))
	defer up.Close()
	release := make(chan struct{})
	mirror := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(&mirGot, r)
		if r.URL.Path == "/slow" {
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
		}
	}))
	defer mirror.Close()
	defer close(release)
	logPath := filepath.Join(t.TempDir(), "access.log")
	w := startWorker(t, nil, fmt.Sprintf(`{"id":"1","uri":"/*","plugins":{"proxy-mirror":{"host":%q},`+
		`"file-logger":{"path":%q,"include_req_body":true,"max_req_body_bytes":8}},"upstream":{"nodes":{%q:1}}}`,
		mirror.URL, logPath, hostPort(up.URL)))
	base := "http://" + w.Addr().String()
	cl := &http.Client{Timeout: 10 * time.Second}

	post := func(path string, body io.Reader, n int) {
		t.Helper()
		req, err := http.NewRequest("POST", base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		if n >= 0 {
			req.ContentLength = int64(n)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := fmt.Sprintf("got %d", n)
		if n < 0 {
			want = fmt.Sprintf("got %d", len(chunkedBody))
		}
		if resp.StatusCode != 200 || string(b) != want {
			t.Fatalf("%s: %d %q, want 200 %q", path, resp.StatusCode, b, want)
		}
	}
	small := []byte("0123456789abcdef")
	post("/length", bytes.NewReader(small), len(small))
	// An io.Reader of no known length goes chunked.
	post("/chunked", io.MultiReader(strings.NewReader(chunkedBody[:5000]), strings.NewReader(chunkedBody[5000:])), -1)
	big := bytes.Repeat([]byte("z"), 2<<20)
	post("/big", bytes.NewReader(big), len(big))
	// The mirror holds /slow's copy; the client's answer comes anyway.
	start := time.Now()
	post("/slow", bytes.NewReader(small), len(small))
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the answer waited %v for the mirror", d)
	}
	post("/last", bytes.NewReader(small), len(small))

	wantSum := map[string][32]byte{"/length": sha256.Sum256(small), "/chunked": sha256.Sum256([]byte(chunkedBody)),
		"/big": sha256.Sum256(big), "/slow": sha256.Sum256(small), "/last": sha256.Sum256(small)}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(mirGot)
		mu.Unlock()
		if n >= 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a copy of /big, were one sent, would be in by now
	mu.Lock()
	for _, g := range upGot {
		if g.sum != wantSum[g.path] || g.te != "" && g.path != "/chunked" {
			t.Errorf("upstream got %s: %d bytes, te %q, not the body sent", g.path, g.n, g.te)
		}
	}
	paths := map[string]bool{}
	for _, g := range mirGot {
		paths[g.path] = true
		if g.sum != wantSum[g.path] || g.te != "" {
			t.Errorf("mirror got %s: %d bytes, te %q, not the body sent", g.path, g.n, g.te)
		}
	}
	if len(upGot) != 5 || len(mirGot) != 4 || paths["/big"] {
		t.Errorf("upstream got %d requests, the mirror %d: %v", len(upGot), len(mirGot), paths)
	}
	mu.Unlock()

	// The log: each request's body cut to max_req_body_bytes.
	var lines []string
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(logPath)
		if lines = strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) == 5 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(lines) != 5 {
		t.Fatalf("log lines: %q", lines)
	}
	for i, want := range []string{"01234567", chunkedBody[:8], "zzzzzzzz", "01234567", "01234567"} {
		var e struct {
			Request struct {
				URI  string `json:"uri"`
				Body string `json:"body"`
			} `json:"request"`
		}
		if err := json.Unmarshal([]byte(lines[i]), &e); err != nil || e.Request.Body != want {
			t.Errorf("log line %d (%s): body %q, want %q (%v)", i, e.Request.URI, e.Request.Body, want, err)
		}
	}
}

// chunkedBody is a body sent chunked: 20 KB that says where each of its
// bytes is.
var chunkedBody = func() string {
	var b strings.Builder
	for i := 0; b.Len() < 20000; i++ {
		fmt.Fprintf(&b, "%06d;", i)
	}
	return b.String()
}()
