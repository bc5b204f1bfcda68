// Package report holds a benchmark run's results and renders them: a
// Markdown table in the seeds' shape (scenario, routes/consumers, upstream,
// QPS, P99, P95, with CPU µs per request, RSS and the ratio to nginx measured
// in the same run), the JSON file, and SVG charts drawn from plain
// text/template (QPS per scenario, QPS against workers, latency percentiles,
// CPU per request).
//
// Rendering functions are pure and safe for concurrent use on a Run that is
// not being modified.
package report
