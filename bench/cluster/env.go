package cluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Env is a cluster scripts/cluster.sh brought up, as its cluster.env
// describes it. Its methods may be called from several goroutines.
type Env struct {
	Script       string   // scripts/cluster.sh
	State        string   // the script's state directory
	Tag          string   // CLUSTER_TAG: the namespaces' prefix
	AdminKey     string   // the control plane's Admin API key
	Admin        string   // http://ip:9180
	DP           []string // the data planes' proxy addresses, ip:port
	Upstream     string   // ip:port
	Redis        string   // ip:port
	Etcd         []string // the etcd members' client addresses, ip:port
	RedisCluster []string // the Redis Cluster's masters, ip:port
	Workers      int      // workers of each coregate node

	client *http.Client // the Admin API's
}

// ParseEnv reads cluster.env's KEY=VALUE lines.
func ParseEnv(r io.Reader) (map[string]string, error) {
	kv := map[string]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("cluster: cluster.env line %d: %q is not KEY=VALUE", n, line)
		}
		kv[k] = v
	}
	return kv, sc.Err()
}

// LoadEnv reads state/cluster.env, which `cluster.sh up` wrote.
func LoadEnv(script, state string) (*Env, error) {
	f, err := os.Open(filepath.Join(state, "cluster.env"))
	if err != nil {
		return nil, fmt.Errorf("cluster: %w (scripts/cluster.sh up first)", err)
	}
	defer f.Close()
	kv, err := ParseEnv(f)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"ADMIN_KEY", "ADMIN", "DP", "UPSTREAM", "REDIS", "REDIS_CLUSTER", "CLUSTER_TAG"} {
		if kv[k] == "" {
			return nil, fmt.Errorf("cluster: cluster.env has no %s", k)
		}
	}
	e := &Env{Script: script, State: state, Tag: kv["CLUSTER_TAG"], AdminKey: kv["ADMIN_KEY"], Admin: kv["ADMIN"],
		DP: strings.Split(kv["DP"], ","), Upstream: kv["UPSTREAM"], Redis: kv["REDIS"],
		RedisCluster: strings.Split(kv["REDIS_CLUSTER"], ",")}
	for _, u := range strings.Split(kv["ETCD"], ",") {
		e.Etcd = append(e.Etcd, strings.TrimPrefix(u, "http://"))
	}
	if len(e.Etcd) != 3 {
		return nil, fmt.Errorf("cluster: cluster.env's ETCD %q: want 3 members", kv["ETCD"])
	}
	_, _ = fmt.Sscan(kv["CLUSTER_WORKERS"], &e.Workers)
	e.client = &http.Client{Transport: &http.Transport{
		DialContext: (&net.Dialer{Timeout: time.Second}).DialContext, MaxIdleConnsPerHost: 4,
	}}
	return e, nil
}

// Run runs the script with args (stop MEMBER, start MEMBER, link MEMBER
// down, ...) on this cluster, bounded by 30 s.
func (e *Env) Run(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.Script, args...)
	cmd.Env = append(os.Environ(), "CLUSTER_STATE="+e.State, "CLUSTER_TAG="+e.Tag)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("cluster: %s %s: %v: %s", filepath.Base(e.Script), strings.Join(args, " "), err,
			bytes.TrimSpace(out))
	}
	return nil
}

// Output is Run that returns what the command wrote on its stdout.
func (e *Env) Output(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.Script, args...)
	cmd.Env = append(os.Environ(), "CLUSTER_STATE="+e.State, "CLUSTER_TAG="+e.Tag)
	out, err := cmd.Output()
	return string(out), err
}

// Put writes an object through the control plane's Admin API (kind
// "routes", ...) and returns the answer's status. A request not answered
// within timeout is an error.
func (e *Env) Put(kind, id, body string, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, e.Admin+"/apisix/admin/"+kind+"/"+id,
		strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-API-KEY", e.AdminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, err
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusServiceUnavailable {
		return resp.StatusCode, fmt.Errorf("cluster: PUT %s/%s: %s: %s", kind, id, resp.Status, bytes.TrimSpace(b))
	}
	return resp.StatusCode, nil
}

// MustPut is Put that wants a 2xx within 5 s.
func (e *Env) MustPut(kind, id, body string) error {
	st, err := e.Put(kind, id, body, 5*time.Second)
	if err == nil && st/100 != 2 {
		err = fmt.Errorf("cluster: PUT %s/%s: status %d", kind, id, st)
	}
	return err
}

// UpstreamRoute is a route's body: uri to the cluster's upstream, with
// plugins (a JSON object's members, or "").
func (e *Env) UpstreamRoute(uri, plugins string) string {
	return fmt.Sprintf(`{"uri":%q,"plugins":{%s},"upstream":{"type":"roundrobin","nodes":{%q:1}}}`,
		uri, plugins, e.Upstream)
}
