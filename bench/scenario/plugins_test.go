package scenario

import (
	"bufio"
	"crypto"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"coregate/internal/e2e"
)

// verifyJWT checks token's signature with the scenario's key material as
// jwt-auth checks it, and returns its header and payload, decoded.
func verifyJWT(t *testing.T, j *JWT, token string) (header, payload map[string]any) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q: %d parts", token, len(parts))
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	signed := []byte(parts[0] + "." + parts[1])
	switch j.Alg {
	case HS256:
		mac := hmac.New(sha256.New, []byte(j.Secret))
		mac.Write(signed)
		if !hmac.Equal(sig, mac.Sum(nil)) {
			t.Errorf("HS256 signature does not verify with the consumer's secret")
		}
	case RS256:
		b, _ := pem.Decode([]byte(j.PublicKeyPEM))
		if b == nil || b.Type != "PUBLIC KEY" {
			t.Fatalf("public_key is not a PKIX PEM block: %q", j.PublicKeyPEM)
		}
		pub, err := x509.ParsePKIXPublicKey(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		rk, ok := pub.(*rsa.PublicKey)
		if !ok || rk.N.BitLen() != 2048 {
			t.Fatalf("public_key %T is not a 2048-bit RSA key", pub)
		}
		digest := sha256.Sum256(signed)
		if err := rsa.VerifyPKCS1v15(rk, crypto.SHA256, digest[:], sig); err != nil {
			t.Errorf("RS256 signature: %v", err)
		}
	}
	for i, v := range []*map[string]any{&header, &payload} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatal(err)
		}
	}
	return header, payload
}

// TestJWTRows: the jwt-auth rows' consumer gets a key made for the run,
// the load a token it signed for the consumer's key, and nginx, which
// has no JWT, the configuration of its no-plugin row.
func TestJWTRows(t *testing.T) {
	sc, err := Select(Seeds(1, 1), "jwt-auth-hs256,jwt-auth-rs256")
	if err != nil {
		t.Fatal(err)
	}
	for i, alg := range []string{HS256, RS256} {
		seed := sc[i]
		t.Run(alg, func(t *testing.T) {
			if seed.JWT == nil || seed.JWT.Alg != alg || seed.Consumers != 1 || !seed.HasPlugin("jwt-auth") || seed.Baseline != "no-plugin" {
				t.Fatalf("scenario %s: %+v", seed.Name, seed)
			}
			if seed.Load.Header != "" || seed.JWT.Token != "" {
				t.Errorf("a token before WithJWTKey: %q", seed.Load.Header)
			}
			s, err := seed.WithJWTKey()
			if err != nil {
				t.Fatal(err)
			}
			if seed.JWT.Token != "" || seed.JWT == s.JWT {
				t.Error("WithJWTKey changed the scenario it was called on")
			}
			token, ok := strings.CutPrefix(s.Load.Header, "Authorization: Bearer ")
			if !ok || !strings.HasSuffix(token, "\r\n") || token[:len(token)-2] != s.JWT.Token {
				t.Fatalf("load header %q", s.Load.Header)
			}
			header, payload := verifyJWT(t, s.JWT, s.JWT.Token)
			if header["alg"] != alg || payload["key"] != "user-key1" {
				t.Errorf("header %v, payload %v", header, payload)
			}
			if exp, _ := payload["exp"].(float64); exp < float64(time.Now().Add(24*time.Hour).Unix()) {
				t.Errorf("exp %v: the token expires within a day", payload["exp"])
			}
			again, err := seed.WithJWTKey()
			if err != nil {
				t.Fatal(err)
			}
			if again.JWT.Token == s.JWT.Token {
				t.Error("two runs sign with the same key")
			}

			var f apisixFile
			if err := yaml.Unmarshal(CoregateRoutes(s, "127.0.0.1:1980"), &f); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"key": "user-key1", "algorithm": alg}
			if alg == HS256 {
				want["secret"] = s.JWT.Secret
			} else {
				want["public_key"] = s.JWT.PublicKeyPEM
			}
			if len(f.Consumers) != 1 || fmt.Sprint(f.Consumers[0].Plugins) != fmt.Sprint(map[string]map[string]string{"jwt-auth": want}) {
				t.Errorf("consumers %+v, want one with jwt-auth %v", f.Consumers, want)
			}
			if _, ok := f.Routes[0].Plugins["jwt-auth"]; !ok {
				t.Errorf("route plugins %v", f.Routes[0].Plugins)
			}
			if got, plain := NginxConfig(s, "/tmp/x", 8080, 1, "127.0.0.1:1980"), NginxConfig(s.Plain(), "/tmp/x", 8080, 1, "127.0.0.1:1980"); string(got) != string(plain) {
				t.Errorf("nginx does more than proxy for jwt-auth:\n%s", got)
			}
			if s.Equivalent() != "" {
				t.Errorf("Equivalent = %q, want proxy only", s.Equivalent())
			}
		})
	}
	if _, err := (Scenario{JWT: &JWT{Alg: "HS999"}}).WithJWTKey(); err == nil {
		t.Error("an unknown algorithm is signed with")
	}
}

// TestIPRestrictionRow: coregate and nginx get the same 100 CIDRs, the
// client's loopback last; nginx lets them in with allow lines in that
// order and keeps the rest out.
func TestIPRestrictionRow(t *testing.T) {
	sc, err := Select(Seeds(1, 1), "ip-restriction")
	if err != nil {
		t.Fatal(err)
	}
	s := sc[0]
	var p struct {
		IPRestriction struct {
			Whitelist []string `json:"whitelist"`
		} `json:"ip-restriction"`
	}
	if err := json.Unmarshal([]byte(s.PluginsJSON()), &p); err != nil {
		t.Fatal(err)
	}
	list := p.IPRestriction.Whitelist
	if len(list) != 100 {
		t.Fatalf("%d CIDRs, want 100", len(list))
	}
	client := netip.MustParseAddr("127.0.0.1")
	seen := map[string]bool{}
	for i, c := range list {
		pfx, err := netip.ParsePrefix(c)
		if err != nil {
			t.Fatal(err)
		}
		if pfx.Contains(client) != (i == len(list)-1) || seen[c] {
			t.Errorf("CIDR %d %s: the client's must be the last, once", i, c)
		}
		seen[c] = true
	}
	conf := string(NginxConfig(s, "/tmp/x", 8080, 1, "127.0.0.1:1980"))
	var allows []string
	for line := range strings.Lines(conf) {
		if a, ok := strings.CutPrefix(strings.TrimSpace(line), "allow "); ok {
			allows = append(allows, strings.TrimSuffix(a, ";"))
		}
	}
	if fmt.Sprint(allows) != fmt.Sprint(list) || !strings.Contains(conf, "allow 127.0.0.0/8;\n            deny all;\n") {
		t.Errorf("nginx allow lines %v, want %v then deny all", allows, list)
	}
	if s.Equivalent() != "allow/deny" || s.Baseline != "no-plugin" || s.Title != "ip-restriction, 100 CIDRs, client allowed" {
		t.Errorf("equivalent %q, baseline %q, title %q", s.Equivalent(), s.Baseline, s.Title)
	}
}

// TestCORSRow: the load sends the origin the plugin allows, and nginx
// adds the headers the plugin's configuration makes, for that origin.
func TestCORSRow(t *testing.T) {
	sc, err := Select(Seeds(1, 1), "cors")
	if err != nil {
		t.Fatal(err)
	}
	s := sc[0]
	if s.Load.Header != "Origin: http://bench.test\r\n" || s.Equivalent() != "add_header Access-Control-*" || s.Baseline != "no-plugin" {
		t.Errorf("header %q, equivalent %q, baseline %q", s.Load.Header, s.Equivalent(), s.Baseline)
	}
	var p struct {
		CORS map[string]any `json:"cors"`
	}
	if err := json.Unmarshal([]byte(s.PluginsJSON()), &p); err != nil {
		t.Fatal(err)
	}
	// the plugin's configuration and the headers nginx writes agree
	for _, h := range corsHeaders {
		key := map[string]string{"Access-Control-Allow-Origin": "allow_origins", "Access-Control-Allow-Methods": "allow_methods",
			"Access-Control-Max-Age": "max_age", "Access-Control-Expose-Headers": "expose_headers",
			"Access-Control-Allow-Headers": "allow_headers"}[h.name]
		if got := fmt.Sprint(p.CORS[key]); got != h.value {
			t.Errorf("cors %s = %s, nginx writes %s: %s", key, got, h.name, h.value)
		}
	}
	conf := string(NginxConfig(s, "/tmp/x", 8080, 1, "127.0.0.1:1980"))
	for _, want := range []string{"map $http_origin $cors_origin {", `"http://bench.test" $http_origin;`,
		"map $cors_origin $cors_allow_methods {", `default "GET,POST";`, "add_header Vary Origin always;",
		"add_header Access-Control-Allow-Origin $cors_origin always;", "add_header Access-Control-Max-Age $cors_max_age always;"} {
		if !strings.Contains(conf, want) {
			t.Errorf("nginx.conf lacks %q", want)
		}
	}
}

// nginxBin returns nginx's path, or skips the test.
func nginxBin(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/nginx"); err != nil {
			t.Skip("nginx not installed")
		}
	}
	return bin
}

// get sends one GET to addr with the extra header lines and returns the
// response, its body read.
func get(t *testing.T, addr, header string) *http.Response {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "GET /hello HTTP/1.1\r\nHost: bench.test\r\n%sConnection: close\r\n\r\n", header); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp
}

// TestNginxServesPluginRows runs nginx with the ip-restriction and cors
// rows' configurations in front of an upstream on loopback: the client
// is let in, and an allowed origin gets the cors plugin's headers where
// another gets Vary alone.
func TestNginxServesPluginRows(t *testing.T) {
	bin := nginxBin(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hello")) }))
	defer up.Close()
	upAddr := strings.TrimPrefix(up.URL, "http://")
	sc, err := Select(Seeds(1, 1), "ip-restriction,cors")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sc {
		t.Run(s.Name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := l.Addr().(*net.TCPAddr).Port
			l.Close()
			dir := t.TempDir()
			conf := filepath.Join(dir, "nginx.conf")
			if err := os.WriteFile(conf, NginxConfig(s, dir, port, 1, upAddr), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "-p", dir+"/", "-c", conf, "-e", filepath.Join(dir, "error.log"))
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer e2e.Terminate(cmd, 5*time.Second)
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err == nil {
					c.Close()
					break
				}
				if time.Now().After(deadline) {
					log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
					t.Fatalf("nginx does not listen on %s: %v\n%s", addr, err, log)
				}
			}
			resp := get(t, addr, s.Load.Header)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d from 127.0.0.1", resp.StatusCode)
			}
			if s.Name != "cors" {
				if resp.Header.Get("Access-Control-Allow-Origin") != "" {
					t.Errorf("ip-restriction adds CORS headers: %v", resp.Header)
				}
				return
			}
			for _, h := range corsHeaders {
				if got := resp.Header.Values(h.name); len(got) != 1 || got[0] != h.value {
					t.Errorf("%s: %q, want %q", h.name, got, h.value)
				}
			}
			if v := resp.Header.Values("Vary"); len(v) != 1 || v[0] != "Origin" {
				t.Errorf("Vary: %q", v)
			}
			other := get(t, addr, "Origin: http://other.test\r\n")
			for _, h := range corsHeaders {
				if v := other.Header.Values(h.name); len(v) != 0 {
					t.Errorf("another origin gets %s: %q", h.name, v)
				}
			}
			if v := other.Header.Values("Vary"); len(v) != 1 || v[0] != "Origin" {
				t.Errorf("another origin: Vary %q", v)
			}
		})
	}
}
