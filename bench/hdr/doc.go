// Package hdr is a fixed-precision latency histogram in the manner of
// HdrHistogram: values are counted in log-linear buckets so that any recorded
// value is reported within 1/1024 (about 0.1 %) of itself, from 0 up to the
// full uint64 range, in constant memory.
//
// Recording is a few arithmetic operations and one increment, with no
// allocation. A Histogram is not safe for concurrent use; give each
// goroutine its own and Merge them.
//
// ExactQuantile ranks a handful of samples kept whole (a run's changes,
// each timed) as a Histogram ranks what it counted.
package hdr
