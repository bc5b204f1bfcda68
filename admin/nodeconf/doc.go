// Package nodeconf is a node's conf/config.yaml: the settings of one
// coregate process (listeners, nginx_config, deployment with its admin and
// etcd sections, the enabled plugins and plugin_attr), as opposed to the
// resources of package spec that every node shares.
//
// Load reads config.yaml with APISIX's keys and defaults
// (apisix/cli/config.lua). Keys coregate does not know, and APISIX keys it
// does not implement yet, come back as warnings, unless ignoring them would
// weaken security or lose data: those are refused (below). Values of the
// wrong type are errors naming the file, the line the key is written on
// and the key (*NodeConfigError, matching ErrNodeConfig:
// "conf/config.yaml:12: nginx_config.worker_processes: ..."; a YAML
// syntax error carries the parser's line), and so are the refused keys.
// Keys lists every key the loader reads, and Template is config.yaml with
// each of them and its default (`coregate init`); Render is a Config
// written the same way (`coregate -T`). apisix.pid_file is
// coregate's own key (the supervisor's pid file). A configuration APISIX
// warns about at start is a warning too, in APISIX's words:
// deployment.admin.admin_key_required false while the Admin API is served
// (AdminKeyBypassed). ParseNginxDuration and ParseNginxSize read nginx's
// time and size syntax.
//
// # Keys coregate does not implement
//
// An APISIX key coregate does not implement is refused, and the node does
// not start, when a node that ignored it would let through what the key
// stops, expose what it guards, or keep in clear what it protects; the
// error names the key and the file, says what ignoring it would do and
// what to write instead. A value that asks for nothing coregate does not
// do already (false, null, an empty string) is accepted. Refused:
//
//   - apisix.delete_uri_tail_slash: true. "/a/" would not be routed as
//     "/a", and could miss the route that guards "/a" for a broader one
//     while the upstream serves it as "/a".
//   - apisix.trusted_addresses, when set. Clients outside them would have
//     their X-Forwarded-For reach the upstream as sent, where APISIX drops
//     it.
//   - apisix.lua_module_hook and nginx_config's main_, http_, http_server_,
//     http_server_location_, http_admin_ and http_end_configuration_snippet,
//     when not empty: Lua code and nginx directives coregate does not run,
//     whose access rules, limits or headers would be skipped.
//   - nginx_config.user, when not empty: the workers would keep the user
//     that started coregate instead of dropping to that one.
//   - nginx_config.http.real_ip_header, real_ip_from and real_ip_recursive,
//     any of them written, unless real_ip_from is empty: coregate takes the
//     client address from the connection only, so every client behind a
//     trusted proxy would have the proxy's address in remote_addrs,
//     ipmatch and the limits keyed on remote_addr.
//   - deployment.admin.https_admin: true. The Admin API would be served
//     over plain HTTP, its keys readable on the wire.
//
// One of APISIX's defaults differs in the same way and, not written,
// cannot be refused: real_ip_from 127.0.0.1 and unix: with real_ip_header
// X-Real-IP (coregate takes no address from it).
//
// # Resolving upstream nodes
//
// apisix.dns_resolver (name servers, "ip" or "ip:port"), dns_resolver_valid
// (seconds a name's addresses are kept, whatever their TTL) and
// resolver_timeout (seconds one lookup may take, default 5) are read as
// APISIX reads them (APISIXConfig) and given to the workers, which resolve
// upstream nodes given by host name with them. Without dns_resolver, the
// system resolver is used, which tells no TTL: addresses are then kept 30
// s unless dns_resolver_valid says otherwise. discovery.dns.servers are
// the name servers of upstreams with discovery_type dns
// (DiscoveryDNSServers).
//
// # apisix.data_encryption
//
// Read as APISIX reads it (DataEncryption): enable_encrypt_fields (default
// true) and keyring, a key or a list of keys of 16 or 32 characters, the
// first encrypting and all decrypting (package keyring); APISIX's keyring
// when none is written. With a keyring, SSL objects' private keys are
// stored encrypted; with enable_encrypt_fields too, on a node whose
// configuration comes from etcd, so are plugins' encrypt_fields. null, or
// a keyring null or empty, stores everything in clear, knowingly.
//
// # apisix.lru.secret
//
// ttl and neg_ttl (SecretTTL, SecretNegTTL; 300 s and 60 s by default, as
// APISIX's) are how long a value read from a secret manager for a
// $secret:// reference, and a failure to read one, are kept before the
// manager is asked again. count and neg_count are reported: values are
// kept one per reference the configuration holds.
//
// # apisix.enable_control
//
// The Control API (APISIX's, served by the supervisor) listens on
// apisix.control's ip and port, 127.0.0.1:9090 by default, unless
// enable_control is false; a port another of the node's listeners has is
// refused, in APISIX's words ("control port 9180 conflicts with admin
// port"). control.router is accepted and changes nothing: only plugins'
// own control APIs take parameters, and coregate's plugins have none.
// apisix.id is the node's id where no conf/apisix.uid was kept yet.
//
// Reported ("not supported yet: <key>"), the node starting without them,
// since ignoring them fails closed or costs a feature, a tuning or a log,
// never a guard:
//
//   - What would serve more, that coregate does not serve at all, so that
//     clients cannot connect or get no answer: apisix.router.ssl,
//     apisix.enable_http2 and node_listen[].enable_http2 (HTTP/1.1 only),
//     apisix.enable_ipv6, apisix.proxy_mode, stream_proxy, proxy_protocol, status,
//     deployment.admin.enable_admin_ui when true,
//     deployment.admin.admin_api_mtls (used only with https_admin),
//     nginx_config.stream and stream_configuration_snippet, stream_plugins,
//     xrpc.
//   - Features coregate does not have, whose objects fail closed:
//     apisix.proxy_cache, discovery but discovery.dns.servers (and
//     discovery.dns's resolv_conf and order), graphql, ext-plugin, wasm,
//     apisix.match_uri_encoded_slash (paths match decoded, so that a route
//     written with "%2F" does not match), apisix.max_post_args_readable_size,
//     deployment.certs (an etcd that wants a client certificate refuses the
//     node), deployment.fallback_cp.
//   - Tunings of what coregate does its own way: apisix.enable_dev_mode,
//     enable_reuseport (always on), extra_lua_path, extra_lua_cpath,
//     enable_resolv_search_opt, disable_sync_configuration_during_start,
//     worker_startup_time_threshold, events, lru.secret.count and
//     neg_count, id, tracing,
//     disable_upstream_healthcheck; nginx_config.enable_cpu_affinity
//     (workers are pinned anyway),
//     worker_rlimit_nofile, worker_shutdown_timeout (--shutdown-timeout),
//     max_pending_timers, max_running_timers, meta, envs;
//     nginx_config.http.proxy_ssl_server_name, charset,
//     variables_hash_max_size, lua_shared_dict, custom_lua_shared_dict;
//     deployment.etcd.resync_delay, health_check_timeout,
//     startup_retry_interval, watch_timeout, startup_retry;
//     plugin_attr.prometheus.prefer_name, metrics.<metric>.expire and the
//     metrics other than http_status, http_latency and bandwidth.
//   - Keys of APISIX 2 that APISIX 3 ignores too: apisix.admin_key,
//     allow_admin, port_admin, enable_admin_cors, admin_listen,
//     https_admin, admin_api_mtls and config_center (deployment.admin and
//     deployment.role now), and the top-level etcd (deployment.etcd).
//
// Like spec it imports only the standard library, YAML and spec itself. A
// Config is read once at start; treat it as read-only afterwards.
package nodeconf
