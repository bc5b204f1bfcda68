package jwtauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"hash"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// The consumer and tokens of t/plugin/jwt-auth.t: key "user-key", secret
// "my-secret-key", HS256; apisixValid expires in 2029, apisixExpired in
// 2019.
const (
	apisixValid   = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJrZXkiOiJ1c2VyLWtleSIsImV4cCI6MTg3OTMxODU0MX0.fNtFJnNmJgzbiYmGB0Yjvm-l6A6M4jRV1l4mnVFSYjs"
	apisixExpired = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJrZXkiOiJ1c2VyLWtleSIsImV4cCI6MTU2Mzg3MDUwMX0.pPNVvh-TQsdDzorRwa-uuiLYiEBODscp9wv0cwD6c68"
)

// keys are the test's key pairs, made once.
var keys = struct {
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
	ed  ed25519.PrivateKey
}{}

func init() {
	var err error
	if keys.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if keys.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		panic(err)
	}
	if _, keys.ed, err = ed25519.GenerateKey(rand.Reader); err != nil {
		panic(err)
	}
}

// publicPEM is a public key as a consumer's public_key.
func publicPEM(t testing.TB, pub crypto.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// sign makes a token of header and payload (JSON) signed with alg: key is
// the HMAC secret or the private key.
func sign(t testing.TB, alg string, key any, header, payload string) string {
	t.Helper()
	signed := b64(header) + "." + b64(payload)
	var sig []byte
	var err error
	h, ch := sha256.New, crypto.SHA256
	switch alg[len(alg)-3:] {
	case "384":
		h, ch = sha512.New384, crypto.SHA384
	case "512":
		h, ch = sha512.New, crypto.SHA512
	}
	digest := func() []byte { d := h(); d.Write([]byte(signed)); return d.Sum(nil) }
	switch {
	case strings.HasPrefix(alg, "HS"):
		m := hmac.New(func() hash.Hash { return h() }, []byte(key.(string)))
		m.Write([]byte(signed))
		sig = m.Sum(nil)
	case strings.HasPrefix(alg, "RS"):
		sig, err = rsa.SignPKCS1v15(rand.Reader, key.(*rsa.PrivateKey), ch, digest())
	case strings.HasPrefix(alg, "PS"):
		sig, err = rsa.SignPSS(rand.Reader, key.(*rsa.PrivateKey), ch, digest(), nil)
	case alg == "EdDSA":
		sig = ed25519.Sign(key.(ed25519.PrivateKey), []byte(signed))
	case strings.HasPrefix(alg, "ES"):
		r, s, e := ecdsa.Sign(rand.Reader, key.(*ecdsa.PrivateKey), digest())
		err = e
		sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	}
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// hs256 is a token of the consumer jack (key "user-key") with payload's
// other members.
func hs256(t testing.TB, more string) string {
	return sign(t, "HS256", "my-secret-key", `{"alg":"HS256","typ":"JWT"}`, `{"key":"user-key"`+more+`}`)
}

// index indexes consumer objects (plugintest.IndexConsumers).
func index(t testing.TB, objs ...string) *plugins.ConsumerIndex {
	return plugintest.IndexConsumers(t, nil, objs...)
}

func build(t testing.TB, conf string, cons plugins.Consumers) plugins.Phases {
	env := plugins.NewLocalEnv()
	env.Consumers = cons
	return *plugintest.BuildEnv(t, Name, conf, env)
}

// consumer is a consumer object with a jwt-auth configuration.
func consumer(name, conf string) string {
	return `{"username":"` + name + `","plugins":{"jwt-auth":` + conf + `}}`
}

// testConsumers are the test's consumers, one per algorithm.
func testConsumers(t testing.TB) *plugins.ConsumerIndex {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return index(t,
		consumer("jack", `{"key":"user-key","secret":"my-secret-key"}`),
		consumer("hs384", `{"key":"k-hs384","secret":"s384","algorithm":"HS384"}`),
		consumer("hs512", `{"key":"k-hs512","secret":"`+strings.Repeat("long", 50)+`","algorithm":"HS512"}`),
		consumer("b64", `{"key":"k-b64","secret":"`+base64.StdEncoding.EncodeToString([]byte("raw\x00secret"))+`","base64_secret":true}`),
		consumer("rs", `{"key":"k-rs","algorithm":"RS256","public_key":`+q(publicPEM(t, &keys.rsa.PublicKey))+`}`),
		consumer("ps", `{"key":"k-ps","algorithm":"PS256","public_key":`+q(publicPEM(t, &keys.rsa.PublicKey))+`}`),
		consumer("es", `{"key":"k-es","algorithm":"ES256","public_key":`+q(publicPEM(t, &keys.ec.PublicKey))+`}`),
		consumer("ed", `{"key":"k-ed","algorithm":"EdDSA","public_key":`+q(publicPEM(t, keys.ed.Public()))+`}`),
		consumer("badkey", `{"key":"k-badkey","algorithm":"RS256","public_key":"not a key"}`),
		consumer("grace", `{"key":"k-grace","secret":"g","lifetime_grace_period":100}`),
		`{"username":"anonymous"}`,
	)
}

// outcome is what a test looks at after one request.
type outcome = plugintest.Outcome

func observe(c *plugintest.Ctx) outcome { return plugintest.Observe(c) }

func request(target string, headers ...string) *plugintest.Ctx {
	c := plugintest.NewCtx("GET", target)
	for i := 0; i+1 < len(headers); i += 2 {
		c.WithHeader(headers[i], headers[i+1])
	}
	return c
}

func passed(consumer, uri string, headers ...string) outcome {
	o := outcome{Status: 200, Consumer: consumer, URI: uri, Headers: map[string]string{"x-consumer-username": consumer}}
	for i := 0; i+1 < len(headers); i += 2 {
		o.Headers[headers[i]] = headers[i+1]
	}
	return o
}

func refused(msg string) outcome {
	return outcome{Status: 401, Body: `{"message":"` + msg + `"}` + "\n", Challenge: `Bearer realm="jwt"`}
}

// TestRewrite follows t/plugin/jwt-auth*.t.
func TestRewrite(t *testing.T) {
	all := testConsumers(t)
	now := time.Now().Unix()
	valid := hs256(t, "")
	rs := sign(t, "RS256", keys.rsa, `{"alg":"RS256"}`, `{"key":"k-rs"}`)
	cookie := "a=1; jwt=" + valid + "; b.c=2; d=x.y"
	for _, tc := range []struct {
		name string
		conf string
		req  *plugintest.Ctx
		want outcome
	}{
		{"missing", `{}`, request("/hello"), refused("Missing JWT token in request")},
		{"invalid", `{}`, request("/hello?jwt=invalid-" + apisixExpired), refused("JWT token invalid")},
		{"expired", `{}`, request("/hello?jwt=" + apisixExpired), refused("failed to verify jwt")},
		{"APISIX's token, header", `{}`, request("/hello", "Authorization", "Bearer "+apisixValid),
			passed("jack", "", "authorization", "Bearer "+apisixValid)},
		{"APISIX's token, lower-case bearer", `{}`, request("/hello", "Authorization", "bearer "+apisixValid),
			passed("jack", "", "authorization", "bearer "+apisixValid)},
		{"APISIX's token, no bearer", `{}`, request("/hello", "Authorization", apisixValid),
			passed("jack", "", "authorization", apisixValid)},
		{"APISIX's token, cookie", `{}`, request("/hello", "Cookie", "jwt="+apisixValid),
			passed("jack", "", "cookie", "jwt="+apisixValid)},
		{"APISIX's token, query", `{}`, request("/hello?jwt=" + apisixValid), passed("jack", "")},
		{"invalid bearer", `{}`, request("/hello", "Authorization", "bearer invalid-"+apisixValid), refused("JWT token invalid")},
		{"header before query", `{}`, request("/hello?jwt="+valid, "Authorization", "x"), refused("JWT token invalid")},
		{"query repeated", `{}`, request("/hello?jwt=" + valid + "&jwt=" + valid), refused("JWT token invalid")},
		{"two parts", `{}`, request("/hello?jwt=" + b64(`{"alg":"HS256"}`) + "." + b64(`{"key":"user-key"}`)), refused("JWT token invalid")},
		{"payload not JSON", `{}`, request("/hello?jwt=" + b64(`{"alg":"HS256"}`) + "." + b64(`{"key":`) + ".AA"), refused("JWT token invalid")},
		{"payload not an object", `{}`, request("/hello?jwt=" + b64(`{"alg":"HS256"}`) + "." + b64(`[1]`) + ".AA"), refused("JWT token invalid")},
		{"no key claim", `{}`, request("/hello?jwt=" + sign(t, "HS256", "my-secret-key", `{"alg":"HS256"}`, `{"sub":"x"}`)),
			refused("missing user key in JWT token")},
		{"unknown key", `{}`, request("/hello?jwt=" + sign(t, "HS256", "my-secret-key", `{"alg":"HS256"}`, `{"key":"nobody"}`)),
			refused("Invalid user key in JWT token")},
		{"key not a string", `{}`, request("/hello?jwt=" + sign(t, "HS256", "my-secret-key", `{"alg":"HS256"}`, `{"key":1}`)),
			refused("Invalid user key in JWT token")},
		{"wrong secret", `{}`, request("/hello?jwt=" + sign(t, "HS256", "other", `{"alg":"HS256"}`, `{"key":"user-key"}`)),
			refused("failed to verify jwt")},
		{"algorithm mismatch", `{}`, request("/hello?jwt=" + sign(t, "HS512", "my-secret-key", `{"alg":"HS512"}`, `{"key":"user-key"}`)),
			refused("failed to verify jwt")},
		{"alg none", `{}`, request("/hello?jwt=" + b64(`{"alg":"none"}`) + "." + b64(`{"key":"user-key"}`) + "."),
			refused("failed to verify jwt")},
		{"escaped key and alg", `{}`, request("/hello?jwt=" + sign(t, "HS256", "my-secret-key", `{"\u0061lg":"HS\u0032\u00356"}`, `{"k\u0065y":"user\u002dkey"}`)),
			passed("jack", "")},
		{"exp ahead", `{}`, request("/hello?jwt=" + hs256(t, fmt.Sprintf(`,"exp":%d`, now+60))), passed("jack", "")},
		{"exp behind", `{}`, request("/hello?jwt=" + hs256(t, fmt.Sprintf(`,"exp":%d`, now-60))), refused("failed to verify jwt")},
		{"exp not a number", `{}`, request("/hello?jwt=" + hs256(t, `,"exp":"soon"`)), refused("failed to verify jwt")},
		{"nbf behind", `{}`, request("/hello?jwt=" + hs256(t, fmt.Sprintf(`,"nbf":%d`, now-60))), passed("jack", "")},
		{"nbf ahead", `{}`, request("/hello?jwt=" + hs256(t, fmt.Sprintf(`,"nbf":%d`, now+60))), refused("failed to verify jwt")},
		{"grace period, exp", `{}`, request("/hello?jwt=" + sign(t, "HS256", "g", `{"alg":"HS256"}`, fmt.Sprintf(`{"key":"k-grace","exp":%d}`, now-60))),
			passed("grace", "")},
		{"grace period, nbf", `{}`, request("/hello?jwt=" + sign(t, "HS256", "g", `{"alg":"HS256"}`, fmt.Sprintf(`{"key":"k-grace","nbf":%d}`, now+60))),
			passed("grace", "")},
		{"grace period passed", `{}`, request("/hello?jwt=" + sign(t, "HS256", "g", `{"alg":"HS256"}`, fmt.Sprintf(`{"key":"k-grace","exp":%d}`, now-200))),
			refused("failed to verify jwt")},
		{"claims_to_verify, exp missing", `{"claims_to_verify":["exp"]}`, request("/hello?jwt=" + valid), refused("failed to verify jwt")},
		{"claims_to_verify, nbf not checked", `{"claims_to_verify":["exp"]}`,
			request("/hello?jwt=" + hs256(t, fmt.Sprintf(`,"exp":%d,"nbf":%d`, now+60, now+60))), passed("jack", "")},
		{"HS384", `{}`, request("/hello?jwt=" + sign(t, "HS384", "s384", `{"alg":"HS384"}`, `{"key":"k-hs384"}`)), passed("hs384", "")},
		{"HS512, long secret", `{}`, request("/hello?jwt=" + sign(t, "HS512", strings.Repeat("long", 50), `{"alg":"HS512"}`, `{"key":"k-hs512"}`)), passed("hs512", "")},
		{"base64_secret", `{}`, request("/hello?jwt=" + sign(t, "HS256", "raw\x00secret", `{"alg":"HS256"}`, `{"key":"k-b64"}`)), passed("b64", "")},
		{"RS256", `{}`, request("/hello?jwt=" + rs), passed("rs", "")},
		{"RS256, another key", `{}`, request("/hello?jwt=" + sign(t, "RS256", mustRSA(t), `{"alg":"RS256"}`, `{"key":"k-rs"}`)), refused("failed to verify jwt")},
		{"RS256 as HS256 with the public key", `{}`,
			request("/hello?jwt=" + sign(t, "HS256", publicPEM(t, &keys.rsa.PublicKey), `{"alg":"HS256"}`, `{"key":"k-rs"}`)), refused("failed to verify jwt")},
		{"PS256", `{}`, request("/hello?jwt=" + sign(t, "PS256", keys.rsa, `{"alg":"PS256"}`, `{"key":"k-ps"}`)), passed("ps", "")},
		{"ES256", `{}`, request("/hello?jwt=" + sign(t, "ES256", keys.ec, `{"alg":"ES256"}`, `{"key":"k-es"}`)), passed("es", "")},
		{"EdDSA", `{}`, request("/hello?jwt=" + sign(t, "EdDSA", keys.ed, `{"alg":"EdDSA"}`, `{"key":"k-ed"}`)), passed("ed", "")},
		{"public key that does not parse", `{}`, request("/hello?jwt=" + sign(t, "RS256", keys.rsa, `{"alg":"RS256"}`, `{"key":"k-badkey"}`)),
			refused("failed to verify jwt")},
		{"key_claim_name", `{"key_claim_name":"iss"}`, request("/hello?jwt=" + sign(t, "HS256", "my-secret-key", `{"alg":"HS256"}`, `{"iss":"user-key"}`)),
			passed("jack", "")},
		{"custom places", `{"header":"X_Token","query":"t","cookie":"c"}`, request("/hello", "X-Token", valid), passed("jack", "", "x-token", valid)},
		{"custom cookie", `{"header":"X_Token","query":"t","cookie":"c"}`, request("/hello", "Cookie", "c="+valid), passed("jack", "", "cookie", "c="+valid)},
		{"realm", `{"realm":"r"}`, request("/hello"),
			outcome{Status: 401, Body: `{"message":"Missing JWT token in request"}` + "\n", Challenge: `Bearer realm="r"`}},

		// hide_credentials: header, query and cookie.
		{"header hidden", `{"hide_credentials":true}`, request("/hello", "Authorization", "Bearer "+valid, "X-Other", "1"),
			passed("jack", "", "x-other", "1")},
		{"query hidden", `{"hide_credentials":true}`, request("/hello?a=1&jwt=" + valid + "&b=2"), passed("jack", "/hello?a=1&b=2")},
		{"cookie hidden", `{"hide_credentials":true}`, request("/hello", "Cookie", cookie), passed("jack", "", "cookie", "a=1; c=2; d=x.y")}, // "b.c": the name is "c", as in APISIX
		{"failed header still hidden", `{"hide_credentials":true}`, request("/hello", "Authorization", "bad"), refused("JWT token invalid")},

		// anonymous_consumer.
		{"anonymous", `{"anonymous_consumer":"anonymous"}`, request("/hello"), passed("anonymous", "")},
		{"anonymous, bad token", `{"anonymous_consumer":"anonymous","hide_credentials":true}`, request("/hello", "Authorization", "bad"),
			passed("anonymous", "")},
		{"anonymous, valid wins", `{"anonymous_consumer":"anonymous"}`, request("/hello?jwt=" + rs), passed("rs", "")},
		{"anonymous not found", `{"anonymous_consumer":"ghost"}`, request("/hello"), refused("Invalid user authorization")},

		// attach_consumer.
		{"consumer headers not spoofed", `{}`,
			request("/hello?jwt="+valid, "X-Consumer-Username", "admin", "X-Credential-Identifier", "c", "X-Consumer-Custom-ID", "x"),
			passed("jack", "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf, all)
			plugintest.Run(&p, tc.req)
			if diff := cmp.Diff(tc.want, observe(tc.req)); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func mustRSA(t testing.TB) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestHMAC: the instance's HMAC, from the padded keys, is crypto/hmac's,
// for short and long keys of each size.
func TestHMAC(t *testing.T) {
	var v verifier
	for _, alg := range []string{"HS256", "HS384", "HS512"} {
		for _, key := range []string{"k", strings.Repeat("x", 64), strings.Repeat("y", 200)} {
			cr, err := newCredential(consumerConf{Algorithm: alg, Secret: key})
			if err != nil {
				t.Fatal(err)
			}
			h := map[string]func() hash.Hash{"HS256": sha256.New, "HS384": sha512.New384, "HS512": sha512.New}[alg]
			m := hmac.New(h, []byte(key))
			m.Write([]byte("header.payload"))
			want := m.Sum(nil)
			if !v.verify(cr, []byte("header.payload"), want) || v.verify(cr, []byte("header.payloaD"), want) {
				t.Errorf("%s key of %d bytes: MAC %x, want %x", alg, len(key), v.mac, want)
			}
		}
	}
}

// TestSchema: APISIX's schemas and messages (t/plugin/jwt-auth.t).
func TestSchema(t *testing.T) {
	for _, tc := range []struct {
		consumer bool
		conf     string
		want     string
	}{
		{true, `{"key":"user-key","secret":"my-secret-key"}`, ""},
		{true, `{"key":123}`, `property "key" validation failed: wrong type: expected string, got number`},
		{true, `{"secret":"s"}`, `property "key" is required`},
		{true, `{"key":"k"}`, `property "secret" is required when using HS based algorithms`},
		{true, `{"key":"k","secret":"not base64!","base64_secret":true}`, `base64_secret required but the secret is not in base64 format`},
		// A secret that decodes to no bytes is an empty HMAC key, with
		// which anyone signs the consumer's tokens.
		{true, `{"key":"k","secret":"====","base64_secret":true}`, `base64_secret required but the secret is not in base64 format`},
		{true, `{"key":"k","secret":"=c2VjcmV0","base64_secret":true}`, `base64_secret required but the secret is not in base64 format`},
		{true, `{"key":"k","secret":"c2VjcmV0","base64_secret":true}`, ""},
		{true, `{"key":"k","algorithm":"RS256"}`, `failed to validate dependent schema for "algorithm": value should match only one schema, but matches none`},
		{true, `{"key":"k","algorithm":"ES256","public_key":"pem"}`, ""},
		{true, `{"key":"k","algorithm":"none","secret":"s"}`, `property "algorithm" validation failed`},
		{true, `{"key":"k","secret":"s","exp":0}`, `property "exp" validation failed`},
		{true, `{"key":"k","secret":"s","lifetime_grace_period":-1}`, `property "lifetime_grace_period" validation failed`},
		{false, `{}`, ""},
		{false, `{"header":"h","query":"q","cookie":"c","hide_credentials":true,"key_claim_name":"iss","store_in_ctx":true,"realm":"r","anonymous_consumer":"a","claims_to_verify":["exp","nbf"]}`, ""},
		{false, `{"claims_to_verify":["iat"]}`, `property "claims_to_verify" validation failed`},
		{false, `{"claims_to_verify":["exp","exp"]}`, `property "claims_to_verify" validation failed`},
		{false, `{"key_claim_name":""}`, `property "key_claim_name" validation failed`},
	} {
		check := plugins.Check
		if tc.consumer {
			check = plugins.CheckConsumer
		}
		got := ""
		if err := check(Name, json.RawMessage(tc.conf)); err != nil {
			got = err.Error()
		}
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("consumer %v %s: %q, want %q", tc.consumer, tc.conf, got, tc.want)
		}
	}
	if got := plugins.Default.EncryptFields(Name, true); len(got) != 1 || got[0] != "secret" {
		t.Errorf("consumer encrypt_fields %q", got)
	}
}

// TestWithoutCookie: remove_specified_cookie's output.
func TestWithoutCookie(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"jwt=a.b.c", ""},
		{"a=1; jwt=x; b=2", "a=1; b=2"},
		{"a=1;jwt=x;  b=2 ", "a=1; b=2"},
		{"weird; a=%41; c=\"q\"", "a=; c="},
	} {
		if got := string(withoutCookie(nil, []byte(tc.in), "jwt")); got != tc.want {
			t.Errorf("withoutCookie(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestAttachConsumer: as APISIX's attach_consumer, the upstream learns the
// consumer's name, the credential object that matched and the consumer's
// labels.custom_id; an anonymous consumer goes without its custom_id.
func TestAttachConsumer(t *testing.T) {
	custom := &plugins.Consumer{Username: "custom", CustomID: "c-42",
		Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"key":"k-own","secret":"s-own"}`)}}
	x, err := plugins.Default.IndexConsumers([]*plugins.Consumer{custom}, []plugins.Credential{{Username: "custom", ID: "cred-7",
		Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"key":"k-cred","secret":"s-cred"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := func(key, secret string) string {
		return sign(t, "HS256", secret, `{"alg":"HS256","typ":"JWT"}`, `{"key":"`+key+`"}`)
	}
	for _, tc := range []struct {
		name, conf, token string
		want              map[string]string
	}{
		{"consumer", `{"hide_credentials":true}`, hs("k-own", "s-own"),
			map[string]string{"x-consumer-username": "custom", "x-consumer-custom-id": "c-42"}},
		{"credential object", `{"hide_credentials":true}`, hs("k-cred", "s-cred"),
			map[string]string{"x-consumer-username": "custom", "x-credential-identifier": "cred-7", "x-consumer-custom-id": "c-42"}},
		{"anonymous", `{"hide_credentials":true,"anonymous_consumer":"custom"}`, hs("k-own", "wrong"),
			map[string]string{"x-consumer-username": "custom"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf, x)
			c := request("/hello", "Authorization", tc.token, "X-Credential-Identifier", "spoofed", "X-Consumer-Custom-ID", "spoofed")
			plugintest.Run(&p, c)
			if diff := cmp.Diff(tc.want, observe(c).Headers); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestHMACFromPadState: a MAC started from the hash's states after ipad
// and opad (padState) is crypto/hmac's, for each HMAC algorithm, and so is
// one started from the pads where there is no state (restart's fallback).
func TestHMACFromPadState(t *testing.T) {
	signed := []byte("eyJhbGciOiJIUzI1NiJ9.eyJrZXkiOiJ1c2VyLWtleSJ9")
	for _, alg := range []string{"HS256", "HS384", "HS512"} {
		for _, secret := range []string{"short", strings.Repeat("a long secret ", 20)} {
			cr, err := newCredential(consumerConf{Algorithm: alg, Secret: secret})
			if err != nil {
				t.Fatal(err)
			}
			if cr.inner == nil || cr.outer == nil {
				t.Fatalf("%s: no pad states", alg)
			}
			key := []byte(secret)
			if len(key) > cr.hs.blockSize() {
				h := cr.hs.new()
				h.Write(key)
				key = h.Sum(nil)
			}
			m := hmac.New(cr.hs.new, key)
			m.Write(signed)
			want := m.Sum(nil)
			var v verifier
			if !v.verify(cr, signed, want) {
				t.Errorf("%s, secret of %d bytes: crypto/hmac's MAC does not verify from the pad states", alg, len(secret))
			}
			if bad := append([]byte{}, want...); v.verify(cr, signed, append(bad[:len(bad)-1], bad[len(bad)-1]^1)) {
				t.Errorf("%s: a MAC with its last bit flipped verifies", alg)
			}
			cr.inner, cr.outer = nil, nil
			if !v.verify(cr, signed, want) {
				t.Errorf("%s, secret of %d bytes: crypto/hmac's MAC does not verify from the pads", alg, len(secret))
			}
		}
	}
}
