// Package scenario declares the benchmark scenarios, APISIX's and Kong's
// published ones (bench/README.md, "Scenarios"), as small data entries
// (routes, consumers, plugins, upstream or not, load, worker counts), and
// renders the configuration each gateway needs for one: coregate's
// config.yaml and standalone apisix.yaml, and the nginx reference's
// nginx.conf.
//
// Route layout, the same for coregate and nginx: a scenario with N routes has
// ids 1..N; routes 1..N-1 serve /hello1 … /hello<N-1>, and route N, the last
// one, serves /hello, which is what the load generator requests. The measured
// route thus shares its prefix with every other route and comes last in the
// file, the worst case for a router that scans or backtracks, as in
// api7/apisix-benchmark's "thousands of /helloN routes" case.
//
// Everything here is plain data and pure functions, safe for concurrent use,
// but for Scenario.WithJWTKey, which makes a new key each call (and is
// safe for concurrent use too).
package scenario
