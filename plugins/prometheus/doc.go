// Package prometheus is APISIX's prometheus plugin (priority 500, log
// phase): each request of a route that has it is counted in
// apisix_http_status, apisix_http_latency (request, upstream and apisix
// latencies, in milliseconds, over APISIX's buckets) and apisix_bandwidth
// (ingress and egress bytes), with the labels of
// apisix/plugins/prometheus/exporter.lua. Its configuration is APISIX's:
// {} or {"prefer_name": true}, which labels with the route's and service's
// names instead of their ids.
//
// Its plugin metadata (MetadataSchema, APISIX's metadata_schema) bounds
// the cardinality: disabled_labels names, per metric, the labels written
// "" (never code or type, which make a metric what it is); Build reads it
// from plugins.Env.Metadata, so a change applies from the next snapshot.
// plugin_attr.prometheus.default_buckets (plugins.Env.Attr) replaces
// Buckets, and metrics.<metric>.extra_labels add labels, variables' values,
// after APISIX's (the export server is told their names);
// metric_prefix is the export server's (it renames the families it
// serves), the series are written under their apisix_ names.
//
// The series are slots of plugins.Env.Metrics: in the gateway, this
// worker's region of the node's shared memory, which the supervisor's
// export server sums over the workers when it is scraped (the families are
// registered here, with plugins.RegisterMetric, so that it knows their
// kinds and labels). A histogram is a slot per bucket and one for the sum
// (in microseconds).
//
// # The log phase
//
// The label values of a request (those disabled emptied) are written
// into a buffer the instance reuses, and its series found in the
// instance's cache by those bytes (latency and bandwidth share one entry,
// keyed by the labels either keeps): a
// request whose labels were seen before allocates nothing and takes no
// lock (a few atomic adds). A new set of labels takes its slots from
// Metrics once; the cache holds at most maxCached sets, past which the
// slots are asked for each time (the label values come from the
// configuration, so that bound is rarely reached). When Metrics is full,
// a new series is not counted (Metrics counts what it refused).
//
// An instance is used by one event loop (the buffer and the cache are its
// own); Build runs off it.
package prometheus
