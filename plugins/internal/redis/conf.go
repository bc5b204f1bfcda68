package redis

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"time"
)

// fields are APISIX's redis-schema fields of a plugin configuration.
type fields struct {
	Host             string   `json:"redis_host"`
	Port             int      `json:"redis_port"`
	Username         string   `json:"redis_username"`
	Password         string   `json:"redis_password"`
	Database         int      `json:"redis_database"`
	Timeout          int      `json:"redis_timeout"`
	SSL              bool     `json:"redis_ssl"`
	SSLVerify        bool     `json:"redis_ssl_verify"`
	KeepaliveTimeout int      `json:"redis_keepalive_timeout"`
	ClusterNodes     []string `json:"redis_cluster_nodes"`
	ClusterName      string   `json:"redis_cluster_name"`
	ClusterSSL       bool     `json:"redis_cluster_ssl"`
	ClusterSSLVerify bool     `json:"redis_cluster_ssl_verify"`
}

// Decode reads the Redis configuration of a plugin configuration that
// passed its schema, by its policy: nil for "local", which needs none;
// the Redis fields, with APISIX's defaults (port 6379, database 0,
// timeout 1000 ms, keepalive 10000 ms), for "redis" and "redis-cluster";
// an error for any other (APISIX's redis-sentinel), so that what the
// gateway cannot run is refused where it is checked.
// redis_keepalive_pool has no use here: one pipelined connection per node
// carries a worker's calls.
func Decode(policy string, raw json.RawMessage) (*Conf, error) {
	switch policy {
	case "local":
		return nil, nil
	case "redis", "redis-cluster":
	default:
		return nil, fmt.Errorf("policy %q is not supported yet, only \"local\", \"redis\" and \"redis-cluster\"", policy)
	}
	f := fields{Port: 6379, Timeout: 1000, KeepaliveTimeout: 10000}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, err
	}
	c := Conf{
		Password:  f.Password,
		Timeout:   time.Duration(f.Timeout) * time.Millisecond,
		Keepalive: time.Duration(f.KeepaliveTimeout) * time.Millisecond,
	}
	switch policy {
	case "redis":
		c.Host, c.Port, c.Username, c.Database = f.Host, f.Port, f.Username, f.Database
		c.SSL, c.SSLVerify = f.SSL, f.SSLVerify
	case "redis-cluster":
		c.Cluster = true
		c.ClusterName = f.ClusterName
		c.SSL, c.SSLVerify = f.ClusterSSL, f.ClusterSSLVerify
		for _, n := range f.ClusterNodes {
			host, port, err := net.SplitHostPort(n)
			if err == nil {
				_, err = strconv.ParseUint(port, 10, 16)
			}
			if err != nil || host == "" {
				return nil, fmt.Errorf("failed to parse address: %s, want host:port", n)
			}
			c.Nodes = append(c.Nodes, n)
		}
	}
	return &c, nil
}
