package jwtauth

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// instanceOf is the jwt-auth instance of built phases.
func instanceOf(t testing.TB, p *plugins.Phases) *instance {
	t.Helper()
	in, ok := p.Rewrite[0].(*instance)
	if !ok {
		t.Fatalf("rewrite phase %T", p.Rewrite[0])
	}
	return in
}

// lookups are an instance's cache hits and misses so far.
func lookups(in *instance) (hits, misses uint64) {
	if in.cache == nil {
		return 0, 0
	}
	return in.cache.hits, in.cache.misses
}

// cacheConsumers are testConsumers' HS256 consumer jack and a consumer
// with a custom_id and a credential object.
func cacheConsumers(t testing.TB) *plugins.ConsumerIndex {
	return plugintest.IndexConsumers(t, []plugins.Credential{{Username: "custom", ID: "cred-7",
		Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"key":"k-cred","secret":"s-cred"}`)}}},
		consumer("jack", `{"key":"user-key","secret":"my-secret-key"}`),
		consumer("rs", `{"key":"k-rs","algorithm":"RS256","public_key":`+quote(publicPEM(t, &keys.rsa.PublicKey))+`}`),
		`{"username":"custom","labels":{"custom_id":"c-42"},"plugins":{"jwt-auth":{"key":"k-own","secret":"s-own"}}}`,
		`{"username":"anonymous"}`,
	)
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestCacheSameOutcome: a token sent again is answered from the cache,
// and the request comes out as the first did and as an instance without
// the cache has it: the consumer, the credential object and custom_id
// headers, the upstream's target, the token hidden wherever it was.
func TestCacheSameOutcome(t *testing.T) {
	x := cacheConsumers(t)
	valid := hs256(t, `,"exp":4102444800`)
	cred := sign(t, "HS256", "s-cred", `{"alg":"HS256"}`, `{"key":"k-cred"}`)
	own := sign(t, "HS256", "s-own", `{"alg":"HS256"}`, `{"key":"k-own","nbf":1}`)
	rs := sign(t, "RS256", keys.rsa, `{"alg":"RS256"}`, `{"key":"k-rs","exp":4102444800}`)
	for _, tc := range []struct {
		name, conf string
		req        func() *plugintest.Ctx
		consumer   string
	}{
		{"header", `{}`, func() *plugintest.Ctx {
			return request("/hello", "Authorization", "Bearer "+valid, "X-Consumer-Username", "x")
		}, "jack"},
		{"header hidden", `{"hide_credentials":true}`, func() *plugintest.Ctx { return request("/hello", "Authorization", "Bearer "+valid) }, "jack"},
		{"query hidden", `{"hide_credentials":true}`, func() *plugintest.Ctx { return request("/hello?a=1&jwt=" + valid + "&b=2") }, "jack"},
		{"cookie hidden", `{"hide_credentials":true}`, func() *plugintest.Ctx { return request("/hello", "Cookie", "a=1; jwt="+valid+"; b=2") }, "jack"},
		{"credential object", `{}`, func() *plugintest.Ctx { return request("/hello?jwt="+cred, "X-Credential-Identifier", "spoofed") }, "custom"},
		{"custom_id", `{"claims_to_verify":["nbf"]}`, func() *plugintest.Ctx { return request("/hello?jwt=" + own) }, "custom"},
		{"RS256", `{}`, func() *plugintest.Ctx { return request("/hello", "Authorization", rs) }, "rs"},
		{"anonymous route", `{"anonymous_consumer":"anonymous"}`, func() *plugintest.Ctx { return request("/hello?jwt=" + valid) }, "jack"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, fresh := build(t, tc.conf, x), build(t, tc.conf, x)
			instanceOf(t, &fresh).noCache = true
			in := instanceOf(t, &p)
			var first outcome
			for i := range 3 {
				c, f := tc.req(), tc.req()
				plugintest.Run(&p, c)
				plugintest.Run(&fresh, f)
				got := observe(c)
				if i == 0 {
					first = got
				}
				if got.Consumer != tc.consumer {
					t.Fatalf("request %d: %+v", i, got)
				}
				if diff := cmp.Diff(observe(f), got); diff != "" {
					t.Fatalf("request %d, cached against uncached (-want +got):\n%s", i, diff)
				}
				if diff := cmp.Diff(first, got); diff != "" {
					t.Fatalf("request %d against the first (-want +got):\n%s", i, diff)
				}
			}
			if h, m := lookups(in); h != 2 || m != 1 {
				t.Fatalf("%d hits, %d misses; want 2 and 1 (the first)", h, m)
			}
		})
	}
}

// TestCacheClock: a cached token's exp and nbf are checked against the
// clock at each use, with the consumer's lifetime_grace_period, as a
// verification checks them: a token that expired between two uses is
// refused with APISIX's answer, from the cache (whose entry stays, for a
// route whose claims_to_verify does not check exp or nbf).
func TestCacheClock(t *testing.T) {
	all := testConsumers(t)
	now := time.Now().Unix()
	sec := int64(time.Second)
	for _, tc := range []struct {
		name, conf, token string
		later             int64 // seconds after the first use
	}{
		{"exp passed", `{}`, hs256(t, fmt.Sprintf(`,"exp":%d`, now+60)), 61},
		{"exp passed, claims_to_verify", `{"claims_to_verify":["exp"]}`, hs256(t, fmt.Sprintf(`,"exp":%d`, now+60)), 120},
		{"grace period passed", `{}`, sign(t, "HS256", "g", `{"alg":"HS256"}`, fmt.Sprintf(`{"key":"k-grace","exp":%d}`, now+10)), 111},
		{"nbf ahead after the clock went back", `{}`, hs256(t, fmt.Sprintf(`,"nbf":%d`, now-10)), -20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, fresh := build(t, tc.conf, all), build(t, tc.conf, all)
			instanceOf(t, &fresh).noCache = true
			in := instanceOf(t, &p)
			c := request("/hello?jwt=" + tc.token)
			c.Clock = now * sec
			plugintest.Run(&p, c)
			if o := observe(c); o.Status != 200 {
				t.Fatalf("first use: %+v", o)
			}
			for i := range 2 {
				c, f := request("/hello?jwt="+tc.token), request("/hello?jwt="+tc.token)
				c.Clock, f.Clock = (now+tc.later)*sec, (now+tc.later)*sec
				plugintest.Run(&p, c)
				plugintest.Run(&fresh, f)
				if diff := cmp.Diff(refused("failed to verify jwt"), observe(c)); diff != "" {
					t.Fatalf("use %d, %d s later (-want +got):\n%s", i+2, tc.later, diff)
				}
				if diff := cmp.Diff(observe(f), observe(c)); diff != "" {
					t.Fatalf("use %d against uncached (-want +got):\n%s", i+2, diff)
				}
			}
			// The second and third uses found it and refused it.
			if h, m := lookups(in); h != 2 || m != 1 {
				t.Fatalf("%d hits, %d misses; want 2 and 1 (the first use)", h, m)
			}
		})
	}
}

// TestCacheOnlyVerified: a token that does not verify is never kept, and
// is refused each time as the first time, whatever the reason.
func TestCacheOnlyVerified(t *testing.T) {
	all := testConsumers(t)
	now := time.Now().Unix()
	for _, tc := range []struct {
		name, conf, token, msg string
	}{
		{"exp required, missing", `{"claims_to_verify":["exp"]}`, hs256(t, ""), "failed to verify jwt"},
		{"nbf ahead", `{}`, hs256(t, fmt.Sprintf(`,"nbf":%d`, now+60)), "failed to verify jwt"},
		{"expired", `{}`, apisixExpired, "failed to verify jwt"},
		{"wrong secret", `{}`, sign(t, "HS256", "other", `{"alg":"HS256"}`, `{"key":"user-key"}`), "failed to verify jwt"},
		{"unknown key", `{}`, sign(t, "HS256", "my-secret-key", `{"alg":"HS256"}`, `{"key":"nobody"}`), "Invalid user key in JWT token"},
		{"invalid", `{}`, "x.y.z", "JWT token invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf, all)
			for i := range 3 {
				c := request("/hello?jwt=" + tc.token)
				plugintest.Run(&p, c)
				if diff := cmp.Diff(refused(tc.msg), observe(c)); diff != "" {
					t.Fatalf("request %d (-want +got):\n%s", i, diff)
				}
			}
			if h, _ := lookups(instanceOf(t, &p)); h != 0 || instanceOf(t, &p).cache.sets != nil {
				t.Fatalf("%d hits; the cache's table %v", h, instanceOf(t, &p).cache.sets != nil)
			}
		})
	}
}

// swapConsumers is a Consumers whose index a test replaces between
// requests, as no worker does (it builds its instances anew with new
// consumers): a cached token must still go with its credential.
type swapConsumers struct{ x *plugins.ConsumerIndex }

func (s *swapConsumers) ByCredential(p string, cred []byte) *plugins.Consumer {
	return s.x.ByCredential(p, cred)
}
func (s *swapConsumers) Find(p string, cred []byte) plugins.Found { return s.x.Find(p, cred) }
func (s *swapConsumers) ByName(name string) *plugins.Consumer     { return s.x.ByName(name) }

// TestCacheCredentialChanged: once the consumer of a cached token is
// gone, or its secret changed, the token is refused as an uncached
// instance refuses it; with the consumer back as it was, it verifies
// again.
func TestCacheCredentialChanged(t *testing.T) {
	before := index(t, consumer("jack", `{"key":"user-key","secret":"my-secret-key"}`))
	valid := hs256(t, "")
	for _, tc := range []struct {
		name  string
		after *plugins.ConsumerIndex
		msg   string
	}{
		{"consumer removed", index(t, consumer("kerouac", `{"key":"other-key","secret":"my-secret-key"}`)), "Invalid user key in JWT token"},
		{"secret changed", index(t, consumer("jack", `{"key":"user-key","secret":"new-secret"}`)), "failed to verify jwt"},
		{"same secret, consumer object anew", index(t, consumer("jack", `{"key":"user-key","secret":"my-secret-key"}`)), ""},
		{"key moved to another consumer", index(t, consumer("kerouac", `{"key":"user-key","secret":"my-secret-key"}`)), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cons := &swapConsumers{before}
			p := build(t, `{}`, cons)
			in := instanceOf(t, &p)
			for range 2 {
				c := request("/hello?jwt=" + valid)
				plugintest.Run(&p, c)
				if o := observe(c); o.Consumer != "jack" {
					t.Fatalf("before: %+v", o)
				}
			}
			cons.x = tc.after
			fresh := build(t, `{}`, tc.after)
			instanceOf(t, &fresh).noCache = true
			for i := range 2 {
				c, f := request("/hello?jwt="+valid), request("/hello?jwt="+valid)
				plugintest.Run(&p, c)
				plugintest.Run(&fresh, f)
				if diff := cmp.Diff(observe(f), observe(c)); diff != "" {
					t.Fatalf("after, request %d, against uncached (-want +got):\n%s", i, diff)
				}
				if tc.msg != "" {
					if diff := cmp.Diff(refused(tc.msg), observe(c)); diff != "" {
						t.Fatalf("after, request %d (-want +got):\n%s", i, diff)
					}
				} else if o := observe(c); o.Status != 200 || c.Consumer() != tc.after.Find(Name, []byte("user-key")).Consumer {
					t.Fatalf("after, request %d: %+v", i, o)
				}
			}
			cons.x = before
			c := request("/hello?jwt=" + valid)
			plugintest.Run(&p, c)
			if o := observe(c); o.Consumer != "jack" {
				t.Fatalf("back: %+v", o)
			}
			if h, _ := lookups(in); h < 2 {
				t.Fatalf("%d hits: the token was not taken from the cache after the change", h)
			}
		})
	}
}

// TestCacheCollision: tokens whose hashes pick one set share its two
// ways: each is found by its own bytes only, a third takes the place of
// the one used least recently, and a token of the same length and set
// that did not verify is never taken for one that did.
func TestCacheCollision(t *testing.T) {
	all := testConsumers(t)
	p := build(t, `{}`, all)
	in := instanceOf(t, &p)
	run := func(tok string) outcome {
		c := request("/hello?jwt=" + tok)
		plugintest.Run(&p, c)
		return observe(c)
	}
	a := hs256(t, `,"n":1000`)
	if o := run(a); o.Status != 200 {
		t.Fatalf("a: %+v", o)
	}
	set := in.cache.hash([]byte(a)) & (cacheSets - 1)
	// Tokens of a's length in a's set: valid ones, and one as long
	// with a's signature on b's claims (a forgery).
	var same []string
	var forged string
	for n := 1001; len(same) < 2 || forged == ""; n++ {
		if n > 1001+100000 {
			t.Fatal("no token in a's set")
		}
		tok := hs256(t, fmt.Sprintf(`,"n":%d`, n))
		f := tok[:strings.LastIndexByte(tok, '.')] + a[strings.LastIndexByte(a, '.'):]
		if len(same) < 2 && in.cache.hash([]byte(tok))&(cacheSets-1) == set {
			same = append(same, tok)
		}
		if forged == "" && in.cache.hash([]byte(f))&(cacheSets-1) == set {
			forged = f
		}
	}
	if o := run(forged); o.Status != 401 {
		t.Fatalf("forged token in a's set: %+v", o)
	}
	b, c := same[0], same[1]
	for _, tok := range []string{b, a, c, a, b} { // c takes b's way, b then c's (a used last)
		if o := run(tok); o.Status != 200 {
			t.Fatalf("%+v", o)
		}
	}
	if h, m := lookups(in); h != 2 || m != 5 {
		t.Fatalf("%d hits, %d misses; want 2 (a, a) and 5 (a first, forged, b, c, b)", h, m)
	}
	ways := &in.cache.sets[set].ways
	if got := [2]string{string(ways[0].tok()), string(ways[1].tok())}; got != [2]string{a, b} && got != [2]string{b, a} {
		t.Fatalf("the set holds %q", got)
	}
}

// TestCacheSizeCap: a token longer than cacheMaxToken verifies each time
// and is not kept.
func TestCacheSizeCap(t *testing.T) {
	all := testConsumers(t)
	p := build(t, `{}`, all)
	in := instanceOf(t, &p)
	long := hs256(t, `,"pad":"`+strings.Repeat("x", cacheMaxToken)+`"`)
	short := hs256(t, `,"pad":"`+strings.Repeat("x", cacheMaxToken/2)+`"`)
	if len(short) > cacheMaxToken || len(long) <= cacheMaxToken {
		t.Fatalf("tokens of %d and %d bytes", len(short), len(long))
	}
	for range 2 {
		for _, tok := range []string{long, short} {
			c := request("/hello", "Authorization", tok)
			plugintest.Run(&p, c)
			if o := observe(c); o.Consumer != "jack" {
				t.Fatalf("%d bytes: %+v", len(tok), o)
			}
		}
	}
	if h, m := lookups(in); h != 1 || m != 1 {
		t.Fatalf("%d hits, %d misses; want 1 (the short token) and 1 (the long one)", h, m)
	}
}

// buildOn builds conf on consumers cons with the Env.Loop loop: the
// instances built on one loop share its token cache, as a worker's do.
func buildOn(t testing.TB, conf string, cons plugins.Consumers, loop *plugins.LoopLocal) plugins.Phases {
	env := plugins.NewLocalEnv()
	env.Consumers, env.Loop = cons, loop
	return *plugintest.BuildEnv(t, Name, conf, env)
}

// TestCacheShared: routes of different jwt-auth configurations, on one
// worker (one Env.Loop), share one token cache, and each answers every
// request as an instance of its configuration without the cache: a token
// verified by its "key" claim on one route is not taken for a token of
// the consumer its "sub" claim names on another, claims_to_verify is the
// using route's, and where a route looks for the token and whether it
// hides it are its own.
func TestCacheShared(t *testing.T) {
	x := cacheConsumers(t)
	loop := plugins.NewLoopLocal()
	confs := []string{
		`{}`,
		`{"key_claim_name":"sub"}`,
		`{"key_claim_name":"iss","hide_credentials":true}`,
		`{"header":"x-jwt","query":"token","cookie":"tk","hide_credentials":true}`,
		`{"claims_to_verify":["exp"]}`,
		`{"claims_to_verify":["nbf"],"anonymous_consumer":"anonymous"}`,
		`{"realm":"other","claims_to_verify":["exp","nbf"]}`,
	}
	cached, fresh := make([]plugins.Phases, len(confs)), make([]plugins.Phases, len(confs))
	for i, conf := range confs {
		cached[i], fresh[i] = buildOn(t, conf, x, loop), build(t, conf, x)
		instanceOf(t, &fresh[i]).noCache = true
		if instanceOf(t, &cached[i]).cache != instanceOf(t, &cached[0]).cache {
			t.Fatalf("route %s has a cache of its own", conf)
		}
	}
	cache := instanceOf(t, &cached[0]).cache
	tokens := []string{
		sign(t, "HS256", "my-secret-key", `{"alg":"HS256"}`, `{"key":"user-key","sub":"user-key"}`),
		sign(t, "HS256", "my-secret-key", `{"alg":"HS256"}`, `{"key":"user-key","sub":"k-cred","exp":4102444800}`),
		sign(t, "HS256", "s-cred", `{"alg":"HS256"}`, `{"key":"k-cred","sub":"user-key","iss":"k-cred","nbf":1}`),
		sign(t, "HS256", "s-own", `{"alg":"HS256"}`, `{"sub":"k-own","iss":"k-own","exp":4102444800,"nbf":1}`),
		sign(t, "HS256", "my-secret-key", `{"alg":"HS256"}`, `{"key":"user-key","sub":"user-key","exp":1}`),
		sign(t, "RS256", keys.rsa, `{"alg":"RS256"}`, `{"key":"k-rs","sub":"user-key","iss":"k-rs","exp":4102444800}`),
	}
	forms := []func(tok string) *plugintest.Ctx{
		func(tok string) *plugintest.Ctx { return request("/hello", "Authorization", "Bearer "+tok) },
		func(tok string) *plugintest.Ctx { return request("/hello", "X-Jwt", tok, "Authorization", "x") },
		func(tok string) *plugintest.Ctx { return request("/hello?a=1&jwt=" + tok + "&token=" + tok) },
		func(tok string) *plugintest.Ctx { return request("/hello", "Cookie", "a=1; tk="+tok+"; jwt="+tok) },
	}
	// A token verified on the first route is found on the fourth, which
	// reads it from another header.
	for i, c := range []*plugintest.Ctx{forms[0](tokens[0]), forms[1](tokens[0])} {
		r := []int{0, 3}[i]
		plugintest.Run(&cached[r], c)
		if o := observe(c); o.Consumer != "jack" {
			t.Fatalf("route %s: %+v", confs[r], o)
		}
	}
	if cache.hits != 1 {
		t.Fatalf("%d hits: the token verified on one route was not found on the other", cache.hits)
	}
	hits := 0
	for round := range 3 {
		for ti, tok := range tokens {
			for fi, form := range forms {
				for k := range confs {
					r := (k + round*ti) % len(confs) // the routes in another order each time
					h0 := cache.hits
					c, f := form(tok), form(tok)
					plugintest.Run(&cached[r], c)
					plugintest.Run(&fresh[r], f)
					if diff := cmp.Diff(observe(f), observe(c)); diff != "" || c.Consumer() != f.Consumer() {
						t.Fatalf("round %d, token %d, form %d, route %s, cached against uncached (-want +got):\n%s", round, ti, fi, confs[r], diff)
					}
					if cache.hits > h0 {
						hits++
					}
				}
			}
		}
	}
	if hits == 0 {
		t.Fatal("no request was answered from the cache")
	}
	t.Logf("%d of %d requests from the cache", hits, 3*len(tokens)*len(forms)*len(confs))
}

// TestCacheSharedConsumersDiffer: a token that route A's instance
// verified and keeps in the worker's cache is, on route B whose
// consumers differ (an instance built with another snapshot's), answered
// as B's own verification answers it: refused when B's consumers lack
// its key or have another secret for it, verified anew and accepted when
// they have the same secret under objects of their own; and A then
// answers it as before.
func TestCacheSharedConsumersDiffer(t *testing.T) {
	before := index(t, consumer("jack", `{"key":"user-key","secret":"my-secret-key"}`))
	valid := hs256(t, "")
	for _, tc := range []struct {
		name string
		b    *plugins.ConsumerIndex
		msg  string
	}{
		{"consumer missing", index(t, consumer("kerouac", `{"key":"other-key","secret":"my-secret-key"}`)), "Invalid user key in JWT token"},
		{"other secret", index(t, consumer("jack", `{"key":"user-key","secret":"new-secret"}`)), "failed to verify jwt"},
		{"same secret, other objects", index(t, consumer("jack", `{"key":"user-key","secret":"my-secret-key"}`)), ""},
		{"key of another consumer", index(t, consumer("kerouac", `{"key":"user-key","secret":"my-secret-key"}`)), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loop := plugins.NewLoopLocal()
			a, b := buildOn(t, `{}`, before, loop), buildOn(t, `{"hide_credentials":true}`, tc.b, loop)
			fa, fb := build(t, `{}`, before), build(t, `{"hide_credentials":true}`, tc.b)
			instanceOf(t, &fa).noCache, instanceOf(t, &fb).noCache = true, true
			cache := instanceOf(t, &a).cache
			for i := range 3 {
				for _, r := range []struct {
					name     string
					p, fresh *plugins.Phases
				}{{"A", &a, &fa}, {"A", &a, &fa}, {"B", &b, &fb}} {
					m0 := cache.misses
					c, f := request("/hello?jwt="+valid), request("/hello?jwt="+valid)
					plugintest.Run(r.p, c)
					plugintest.Run(r.fresh, f)
					if diff := cmp.Diff(observe(f), observe(c)); diff != "" || c.Consumer() != f.Consumer() {
						t.Fatalf("round %d, route %s, cached against uncached (-want +got):\n%s", i, r.name, diff)
					}
					if r.name == "A" {
						continue
					}
					if tc.msg != "" {
						if o := observe(c); o.Status != 401 || o.Body != refused(tc.msg).Body {
							t.Fatalf("round %d, route B: %+v; want %q", i, o, tc.msg)
						}
						continue
					}
					if o := observe(c); o.Status != 200 || c.Consumer() != tc.b.Find(Name, []byte("user-key")).Consumer {
						t.Fatalf("round %d, route B: %+v", i, o)
					}
					// A had it last: B found A's entry, whose
					// credential is not B's, and verified the token.
					if cache.misses == m0 && cache.hits == 0 {
						t.Fatalf("round %d, route B: neither found nor verified", i)
					}
				}
			}
		})
	}
}

// TestCacheMemory: the instances of a worker share one cache, whose table
// is made once: a thousand jwt-auth routes, a token verified on each,
// hold what a route's instance holds, and one table, not a table each.
// It measures the heap (runtime.MemStats.HeapAlloc after a collection)
// that n instances built on one Env.Loop hold once each has verified a
// token of its own, and that of instances built without one (each its own
// cache, as a cache per instance was).
func TestCacheMemory(t *testing.T) {
	x := testConsumers(t)
	tokens := make([]string, 1000)
	for i := range tokens {
		tokens[i] = hs256(t, fmt.Sprintf(`,"exp":%d`, 4102444800+i))
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// held is the heap n instances hold, built on loop (each its own
	// cache when nil), each having verified its token.
	held := func(n int, loop *plugins.LoopLocal) (uint64, []plugins.Phases) {
		ps := make([]plugins.Phases, n)
		reqs := make([]*plugintest.Ctx, n)
		for i := range reqs {
			reqs[i] = request("/hello", "Authorization", "Bearer "+tokens[i])
		}
		h0 := heap()
		for i := range ps {
			if loop != nil {
				ps[i] = buildOn(t, `{}`, x, loop)
			} else {
				ps[i] = build(t, `{}`, x)
				instanceOf(t, &ps[i]).cache = newTokenCache()
			}
			plugintest.Run(&ps[i], reqs[i])
			if reqs[i].Consumer() == nil {
				t.Fatalf("refused: %s", reqs[i].Body)
			}
		}
		h := heap()
		runtime.KeepAlive(reqs)
		if h < h0 {
			return 0, ps
		}
		return h - h0, ps
	}
	table := uint64(unsafe.Sizeof([cacheSets]cacheSet{}))
	loop := plugins.NewLoopLocal()
	shared, ps := held(1000, loop)
	for i := range ps {
		if in := instanceOf(t, &ps[i]); in.cache != instanceOf(t, &ps[0]).cache || in.cache.sets == nil {
			t.Fatalf("instance %d: a cache of its own, or none", i)
		}
	}
	own, _ := held(20, nil)
	t.Logf("table %d bytes (%d an entry); 1000 instances on one loop: %d bytes, %d an instance; 20 with a cache each: %d bytes, %d an instance",
		table, unsafe.Sizeof(cacheEntry{}), shared, shared/1000, own, own/20)
	// What a route adds is its instance's, far less than a table: the
	// tables of a thousand routes would be 1000 of them.
	if shared > table+1000*table/8 {
		t.Fatalf("1000 instances hold %d bytes; a table is %d", shared, table)
	}
	if own < 20*table {
		t.Fatalf("20 instances with a cache each hold %d bytes, less than 20 tables of %d: the measure is off", own, table)
	}
}
