// Package e2e is the harness of the end-to-end tests: they run the real
// coregate binary, built once per test process (Build), on loopback
// against real origins, and look at it from outside, as an operator would
// (its output, /proc, sock_diag).
//
// What every helper guarantees:
//
//   - Ports are free: FreePort hands out a loopback port nobody listens
//     on when it returns, and never the same port twice in one test
//     process. No helper uses a fixed port. A gateway's TLS listener
//     (apisix.ssl, whose default is APISIX's fixed 9443) gets one too:
//     SSLListen writes it on TLSPort, and Start refuses a config.yaml
//     that listens for TLS on a port no test took as free.
//   - Waits are bounded: every helper that waits takes a timeout or has a
//     documented one, and fails the test (t.Fatalf, or t.Errorf where
//     said) when it passes. Load loops are bounded in time and in count.
//   - Cleanup is registered with t.Cleanup by the helper that makes the
//     resource: a Gateway is stopped, origins are closed, connections are
//     closed, when the test ends.
//   - Processes are ended by PID: a helper ends only the processes the
//     test started (the gateway it ran and that gateway's own worker
//     processes, found as its children in /proc; the etcd members of an
//     Etcd or EtcdCluster), never by name.
//
// The package is for tests only: no code that is built into the product
// imports it (cmd/layering holds that rule). Its helpers take a
// testing.TB and are safe to call from one test's goroutine; the types
// that say so are safe for concurrent use.
package e2e
