// Package plugins holds the plugin model and the registry of plugins the
// gateway knows, by their APISIX wire names.
//
// A plugin runs in fixed APISIX-style phases (rewrite, access, before_proxy,
// header_filter, body_filter, log), not in a nested middleware chain: the
// worker's event loop cannot keep a stack alive across the upstream round
// trip, so a request is a resumable state machine that records its phase
// and position. Execution order comes from each plugin's priority (highest
// first, ties by name), never from the order a route lists its plugins.
//
// A Factory builds an Instance from a route's raw JSON configuration off the
// event loop, once per configuration snapshot; the worker type-asserts the
// phase interfaces an Instance implements once, into per-route phase
// tables, so a request does no lookups.
//
// Registration happens in init functions and the registry is read-only
// afterwards: Lookup and Order are safe for concurrent use.
package plugins
