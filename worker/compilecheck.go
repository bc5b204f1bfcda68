package worker

import (
	"coregate/admin/spec"
	"coregate/worker/router"
)

// CompileCheck is Compile as a worker of the node compiles s: private keys
// stored encrypted (upstreams' tls.client_key) are read with decrypt, the
// node's keyring (Config.Decrypt; nil: as stored). The snapshot is for
// `coregate -t`, which only wants to know that it builds.
func CompileCheck(s *spec.Spec, mode router.Mode, decrypt func(field, s string) (string, error)) (*Snapshot, error) {
	return compile(s, mode, upstreamEnv{decrypt: decrypt}, pluginSet{}, nil, nil)
}
