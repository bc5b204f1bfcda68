// Package all imports every plugin of the gateway for its registration in
// plugins.Default: a program that serves plugins (cmd/coregate) imports
// it, blank, and has them all, for the Admin API's checks and the
// workers' builds alike. A new plugin package adds its import here.
//
// docs/plugins/ holds each plugin's README as a page, written by
// TestPluginDocs (go generate ./plugins/all), which fails while a page
// differs from its README.
package all

//go:generate go test -count=1 -run TestPluginDocs -update

import (
	// Each registers itself in plugins.Default from its init function.
	_ "coregate/plugins/apibreaker"          // api-breaker (1005, access, log)
	_ "coregate/plugins/basicauth"           // basic-auth (2520, rewrite)
	_ "coregate/plugins/consumerrestriction" // consumer-restriction (2400, access)
	_ "coregate/plugins/cors"                // cors (4000, rewrite, header_filter)
	_ "coregate/plugins/csrf"                // csrf (2980, access, header_filter)
	_ "coregate/plugins/echo"                // echo (412, header_filter, body_filter)
	_ "coregate/plugins/faultinjection"      // fault-injection (11000, rewrite)
	_ "coregate/plugins/filelogger"          // file-logger (399, log)
	_ "coregate/plugins/hmacauth"            // hmac-auth (2530, rewrite)
	_ "coregate/plugins/httplogger"          // http-logger (410, log)
	_ "coregate/plugins/iprestriction"       // ip-restriction (3000, access)
	_ "coregate/plugins/jwtauth"             // jwt-auth (2510, rewrite)
	_ "coregate/plugins/keyauth"             // key-auth (2500, rewrite)
	_ "coregate/plugins/limitconn"           // limit-conn (1003, access, log)
	_ "coregate/plugins/limitcount"          // limit-count (1002, access)
	_ "coregate/plugins/limitreq"            // limit-req (1001, access)
	_ "coregate/plugins/mocking"             // mocking (10900, access)
	_ "coregate/plugins/opentelemetry"       // opentelemetry (12009, rewrite, log)
	_ "coregate/plugins/prometheus"          // prometheus (500, log)
	_ "coregate/plugins/proxymirror"         // proxy-mirror (1010, rewrite)
	_ "coregate/plugins/proxyrewrite"        // proxy-rewrite (1008, rewrite)
	_ "coregate/plugins/realip"              // real-ip (23000, rewrite)
	_ "coregate/plugins/redirect"            // redirect (900, rewrite)
	_ "coregate/plugins/refererrestriction"  // referer-restriction (2990, access)
	_ "coregate/plugins/requestid"           // request-id (12015, rewrite, header_filter)
	_ "coregate/plugins/requestvalidation"   // request-validation (2800, rewrite)
	_ "coregate/plugins/responserewrite"     // response-rewrite (899, header_filter, body_filter, log)
	_ "coregate/plugins/trafficsplit"        // traffic-split (966, access)
	_ "coregate/plugins/uarestriction"       // ua-restriction (2999, access)
	_ "coregate/plugins/uriblocker"          // uri-blocker (2900, rewrite)
)
