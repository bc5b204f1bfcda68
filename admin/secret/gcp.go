package secret

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// GCP is a gcp object: a service account's credentials, written in the
// object (auth_config) or in a file (auth_file, read when a secret is),
// and whether the servers' certificates are verified (ssl_verify, true
// unless false).
type GCP struct {
	AuthConfig *GCPAuth `json:"auth_config"`
	AuthFile   string   `json:"auth_file"`
	SSLVerify  *bool    `json:"ssl_verify"`
}

// GCPAuth is a service account's credentials and where it gets tokens
// and secrets, as APISIX's auth_config: token_uri and entries_uri default
// to Google's, scope to cloud-platform.
type GCPAuth struct {
	ClientEmail string   `json:"client_email"`
	PrivateKey  string   `json:"private_key"`
	ProjectID   string   `json:"project_id"`
	TokenURI    string   `json:"token_uri"`
	Scope       []string `json:"scope"`
	EntriesURI  string   `json:"entries_uri"`
}

// Get reads key from Google Cloud Secret Manager's REST API, as APISIX's
// gcp.get does: key is a secret's name, optionally followed by
// "/<member>" of its value, a JSON object; the latest version is read
// (GET <entries_uri>/projects/<project>/secrets/<name>/versions/latest:access)
// with an access token the service account gets by OAuth 2.0's JWT bearer
// grant (RFC 7523: an RS256 assertion signed with its private key, POSTed
// to token_uri). The requests are bounded by ctx and by DefaultTimeout;
// an error never holds a value nor a key. Safe for concurrent use; c nil
// is http.DefaultClient.
func (g *GCP) Get(ctx context.Context, c *http.Client, key string) (string, error) {
	name, member, hasMember := strings.Cut(key, "/")
	if name == "" {
		return "", errors.New("can't find main key, key: " + key)
	}
	fail := func(why string) (string, error) {
		return "", errors.New("failed to retrieve data from gcp secret manager: " + why)
	}
	auth, err := g.auth()
	if err != nil {
		return fail(err.Error())
	}
	if c == nil {
		c = http.DefaultClient
	}
	if g.SSLVerify != nil && !*g.SSLVerify {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// ssl_verify: false, as the object asks.
		t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
		c = &http.Client{Transport: t}
		defer t.CloseIdleConnections()
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	token, err := auth.token(ctx, c)
	if err != nil {
		return fail(err.Error())
	}
	u := strings.TrimRight(auth.EntriesURI, "/") + "/projects/" + url.PathEscape(auth.ProjectID) +
		"/secrets/" + url.PathEscape(name) + "/versions/latest:access"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fail(err.Error())
	}
	req.Header.Set("Authorization", "Bearer "+token)
	body, status, err := do(c, req)
	if err != nil {
		return fail(err.Error())
	}
	if status != http.StatusOK {
		return fail("status " + strconv.Itoa(status))
	}
	var ans struct {
		Payload *struct {
			Data string `json:"data"`
		} `json:"payload"`
	}
	if json.Unmarshal(body, &ans) != nil || ans.Payload == nil {
		return fail("invalid payload")
	}
	v, err := base64.StdEncoding.DecodeString(ans.Payload.Data)
	if err != nil {
		return fail("invalid payload")
	}
	if !hasMember {
		return string(v), nil
	}
	var data map[string]json.RawMessage
	var s string
	if json.Unmarshal(v, &data) != nil || data == nil {
		return "", errors.New("the value of the secret " + name + " is not a JSON object")
	}
	if raw, ok := data[member]; !ok || json.Unmarshal(raw, &s) != nil {
		return "", errors.New("no string member " + strconv.Quote(member) + " in the secret " + name)
	}
	return s, nil
}

// auth is the credentials, from the object or its file, with defaults.
func (g *GCP) auth() (*GCPAuth, error) {
	var a GCPAuth
	switch {
	case g.AuthConfig != nil:
		a = *g.AuthConfig
	case g.AuthFile != "":
		b, err := os.ReadFile(g.AuthFile)
		if err != nil {
			return nil, errors.New("failed to read configuration, file: " + g.AuthFile)
		}
		if json.Unmarshal(b, &a) != nil || a.ClientEmail == "" || a.PrivateKey == "" || a.ProjectID == "" {
			return nil, errors.New("config parse failure, file: " + g.AuthFile)
		}
	default:
		return nil, errors.New("no auth_config nor auth_file")
	}
	if a.TokenURI == "" {
		a.TokenURI = "https://oauth2.googleapis.com/token"
	}
	if a.EntriesURI == "" {
		a.EntriesURI = "https://secretmanager.googleapis.com/v1"
	}
	if len(a.Scope) == 0 {
		a.Scope = []string{"https://www.googleapis.com/auth/cloud-platform"}
	}
	return &a, nil
}

// token gets an access token by the JWT bearer grant.
func (a *GCPAuth) token(ctx context.Context, c *http.Client) (string, error) {
	assertion, err := a.assertion(time.Now())
	if err != nil {
		return "", err
	}
	form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {assertion}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.TokenURI, strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	body, status, err := do(c, req)
	if err != nil {
		return "", errors.New("failed to get google oauth token: " + err.Error())
	}
	var ans struct {
		AccessToken string `json:"access_token"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &ans) != nil || ans.AccessToken == "" {
		return "", errors.New("failed to get google oauth token: status " + strconv.Itoa(status))
	}
	return ans.AccessToken, nil
}

// assertion is the signed JWT of the grant: iss the account, aud the
// token URI, the scopes, valid for an hour from now.
func (a *GCPAuth) assertion(now time.Time) (string, error) {
	blk, _ := pem.Decode([]byte(a.PrivateKey))
	if blk == nil {
		return "", errors.New("the private key is not PEM")
	}
	var key *rsa.PrivateKey
	if k, err := x509.ParsePKCS8PrivateKey(blk.Bytes); err == nil {
		key, _ = k.(*rsa.PrivateKey)
	} else if k, err := x509.ParsePKCS1PrivateKey(blk.Bytes); err == nil {
		key = k
	}
	if key == nil {
		return "", errors.New("the private key is not an RSA key")
	}
	enc := base64.RawURLEncoding
	head := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`))
	claims, _ := json.Marshal(map[string]any{
		"iss": a.ClientEmail, "aud": a.TokenURI, "scope": strings.Join(a.Scope, " "),
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	})
	signing := head + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return signing + "." + enc.EncodeToString(sig), nil
}

// do sends req and reads at most maxVaultBody of the answer; the error
// does not hold the URL.
func do(c *http.Client, req *http.Request) ([]byte, int, error) {
	resp, err := c.Do(req)
	if err != nil {
		return nil, 0, errors.New(scrubURLError(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxVaultBody))
	return b, resp.StatusCode, err
}
