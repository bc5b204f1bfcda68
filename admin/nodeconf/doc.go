// Package nodeconf is a node's conf/config.yaml: the settings of one
// coregate process (listeners, nginx_config, deployment with its admin and
// etcd sections, the enabled plugins and plugin_attr), as opposed to the
// resources of package spec that every node shares.
//
// Load reads config.yaml with APISIX's keys and defaults
// (apisix/cli/config.lua). Keys coregate does not know, and APISIX keys it
// does not implement yet, come back as warnings; values of the wrong type
// are errors naming the key (*NodeConfigError, matching ErrNodeConfig).
// ParseNginxDuration and ParseNginxSize read nginx's time and size syntax.
//
// Like spec it imports only the standard library, YAML and spec itself. A
// Config is read once at start; treat it as read-only afterwards.
package nodeconf
