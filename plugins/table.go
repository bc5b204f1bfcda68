package plugins

// Table is the one ordered list of the plugins the gateway can have, with
// APISIX's names and priorities (each plugin's `priority` in
// apisix/plugins/<name>.lua), highest priority first: within a phase,
// plugins run in this order. A plugin implementation registers under a
// name of this table (Register panics on any other), so adding a plugin
// starts here, as CoreDNS's plugin.cfg.
//
// A name in the table but not registered is, to a configuration, an
// unknown plugin, as a plugin APISIX has not enabled.
var Table = []Entry{
	{Name: "real-ip", Priority: 23000},
	{Name: "request-id", Priority: 12015},
	{Name: "opentelemetry", Priority: 12009},
	{Name: "fault-injection", Priority: 11000},
	{Name: "mocking", Priority: 10900},
	{Name: "cors", Priority: 4000},
	{Name: "ip-restriction", Priority: 3000},
	{Name: "ua-restriction", Priority: 2999},
	{Name: "referer-restriction", Priority: 2990},
	{Name: "csrf", Priority: 2980},
	{Name: "uri-blocker", Priority: 2900},
	{Name: "request-validation", Priority: 2800},
	{Name: "hmac-auth", Priority: 2530},
	{Name: "basic-auth", Priority: 2520},
	{Name: "jwt-auth", Priority: 2510},
	{Name: "key-auth", Priority: 2500},
	{Name: "consumer-restriction", Priority: 2400},
	{Name: "proxy-cache", Priority: 1085},
	{Name: "proxy-mirror", Priority: 1010},
	{Name: "proxy-rewrite", Priority: 1008},
	{Name: "api-breaker", Priority: 1005},
	{Name: "limit-conn", Priority: 1003},
	{Name: "limit-count", Priority: 1002},
	{Name: "limit-req", Priority: 1001},
	{Name: "traffic-split", Priority: 966},
	{Name: "redirect", Priority: 900},
	{Name: "response-rewrite", Priority: 899},
	{Name: "prometheus", Priority: 500},
	{Name: "echo", Priority: 412},
	{Name: "http-logger", Priority: 410},
	{Name: "file-logger", Priority: 399},
}
