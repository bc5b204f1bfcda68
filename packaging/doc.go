// Package packaging holds no code: it is where coregate's packages are
// described and where their tests run. The files beside this one are:
//
//	coregate.service  the systemd unit (make install writes its PREFIX's
//	                  binary path and SYSCONFDIR into it)
//	adduser           make install's last step as root: the coregate user
//	                  and the configuration directory's group
//	nfpm.yaml, deb/   the .deb (make deb) and its maintainer scripts
//	../Dockerfile     the container image; cmd/probe is its HEALTHCHECK
//
// # The unit
//
// Type=simple: the supervisor does not speak sd_notify; systemd counts the
// service started once the process runs, and ExecStartPre (`coregate -t`)
// has refused a config.yaml that would not start. ExecReload sends SIGHUP
// to the supervisor, which re-reads config.yaml and rolls the workers
// whose settings changed; a refused config.yaml is logged and changes
// nothing. KillMode=mixed: SIGTERM goes to the supervisor alone, which
// drains its workers (they finish what they accepted within
// --shutdown-timeout) and exits after them; SIGKILL reaches whatever is
// left at TimeoutStopSec (30 s). With the default control-group mode
// systemd would send SIGTERM to the workers too, beside the supervisor's
// own order to drain. A worker outlives a supervisor that crashed, for the
// next one to take over; under systemd the unit's remaining processes are
// killed before Restart=on-failure starts it again, so that a restarted
// node starts new workers and takeover is not used.
//
// Capabilities, exactly two, ambient for the coregate user:
// CAP_NET_BIND_SERVICE for node_listen ports below 1024, and CAP_BPF for
// the eBPF socket selector: loading a BPF_PROG_TYPE_SK_REUSEPORT program
// and creating its BPF_MAP_TYPE_REUSEPORT_SOCKARRAY and array maps need
// CAP_BPF alone (the kernel counts sk_reuseport among the programs that
// need no CAP_NET_ADMIN, and SO_ATTACH_REUSEPORT_EBPF needs no capability),
// also with kernel.unprivileged_bpf_disabled set. Without CAP_BPF the node
// logs "eBPF socket selector unavailable, using a fallback" and serves
// with the kernel's own SO_REUSEPORT spreading. Pinning a worker to its
// CPU (sched_setaffinity on its own threads) needs no capability.
//
// LimitNOFILE=1048576 for the connections. The hardening: NoNewPrivileges,
// ProtectSystem=strict with the embedded etcd's data in the state
// directory /var/lib/coregate (ExecStart's --etcd-data), the logs
// directory /var/log/coregate, and /etc/coregate writable: the node writes
// its id (apisix.uid), its copy of the configuration (config-cache.json)
// and a generated admin key (admin-keys.json) beside config.yaml, as
// APISIX writes conf/; the directory is root's, the coregate group's, mode
// 1770, so that the sticky bit keeps the group from replacing root's
// config.yaml. ProtectHome, PrivateTmp, PrivateDevices,
// ProtectKernelModules, ProtectControlGroups.
//
// # Tests
//
// There is no systemd process 1 where the tests run: they install into a
// temporary DESTDIR (make install) or onto the machine (the .deb, only
// where COREGATE_TEST_DPKG=1 or CI=true: a throwaway machine), read the
// installed unit and run its commands as systemd would: as the unit's user
// (nobody for make install's), with exactly its capabilities, bounding set
// and LimitNOFILE (setpriv, prlimit), checking what the processes got
// from /proc. systemd-analyze verify checks the unit where it is
// installed. The Dockerfile is linted; it is built only where a Docker
// engine answers.
package packaging
