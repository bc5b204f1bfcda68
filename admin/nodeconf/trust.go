package nodeconf

import (
	"crypto/x509"
	"fmt"
	"os"
	"strings"
)

// TrustedCAs reads apisix.ssl.ssl_trusted_certificate: "system" (or
// nothing) for the system's CAs, PEM files, or both, comma-separated. A
// nil pool means the system's. The etcd client and the https upstreams
// (worker.Config.UpstreamCAs) trust what it gives.
func TrustedCAs(list string) (*x509.CertPool, error) {
	system := false
	var files []string
	for item := range strings.SplitSeq(list, ",") {
		switch item = strings.TrimSpace(item); item {
		case "":
		case "system":
			system = true
		default:
			files = append(files, item)
		}
	}
	if len(files) == 0 {
		return nil, nil
	}
	pool := x509.NewCertPool()
	if system {
		sys, err := x509.SystemCertPool()
		if err != nil {
			return nil, fmt.Errorf("apisix.ssl.ssl_trusted_certificate: system: %w", err)
		}
		pool = sys
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("apisix.ssl.ssl_trusted_certificate: %w", err)
		}
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("apisix.ssl.ssl_trusted_certificate: %s: no PEM certificate", f)
		}
	}
	return pool, nil
}
