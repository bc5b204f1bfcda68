#!/usr/bin/env bash
# A coregate cluster on one machine, in network namespaces this script
# makes (root and `ip netns` needed):
#
#   scripts/cluster.sh up       start everything, wait until it answers
#   scripts/cluster.sh down     stop what up started, delete its namespaces
#   scripts/cluster.sh status   each member and whether it answers
#   scripts/cluster.sh stop MEMBER [SIGNAL]   stop one member (TERM; KILL
#                               for a coregate node kills its workers too)
#   scripts/cluster.sh start MEMBER           start it again
#   scripts/cluster.sh link MEMBER down|up    cut a member off the network
#   scripts/cluster.sh exec MEMBER CMD...     run CMD in MEMBER's namespace
#
# Members, each in a namespace of its own on the private network
# $CLUSTER_NET.0/24 (10.77.0.0/24 by default): etcd1..etcd3 (a 3-member etcd
# cluster), redis (one redis-server), rc (a 3-master Redis Cluster, ports
# 7001-7003), up (bin/demoupstream on :1980), cp (a coregate control_plane
# node, Admin API on :9180), dp1..dp3 (coregate data_plane nodes on etcd,
# proxy on :9080) and client (nothing runs there; load and probes are run
# in it, `scripts/cluster.sh exec client curl ...`). The namespaces are
# joined by a bridge in a namespace of its own (the switch, <tag>-sw), each
# by a veth pair made with both ends inside the namespaces: no address and
# no interface is added to the host's own namespace.
#
# State (PIDs, addresses, configs, logs) is kept in $CLUSTER_STATE or
# --state DIR, given before the command (default ${XDG_RUNTIME_DIR:-/tmp}/coregate-cluster-<tag>); cluster.env
# there holds the addresses and the Admin API key, KEY=VALUE lines.
# CLUSTER_TAG (default cg) prefixes the namespaces' names, so that two
# clusters can run side by side. CLUSTER_WORKERS: the workers of each
# coregate node (default 2, 1 on a machine with fewer than 4 CPUs).
# Every wait is bounded; down stops processes by the PIDs up recorded (and
# whatever still runs in the namespaces up made), and is safe to run again
# or after an up that failed half-way.
set -euo pipefail

# --state DIR before the command: CLUSTER_STATE=DIR
if [ "${1:-}" = --state ]; then
  [ $# -ge 2 ] || { echo "cluster: --state DIR" >&2; exit 1; }
  CLUSTER_STATE=$2
  shift 2
fi

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TAG=${CLUSTER_TAG:-cg}
NET=${CLUSTER_NET:-10.77.0}
STATE=${CLUSTER_STATE:-${XDG_RUNTIME_DIR:-/tmp}/coregate-cluster-$TAG}
COREGATE=${COREGATE:-$ROOT/bin/coregate}
UPSTREAM=${UPSTREAM:-$ROOT/bin/demoupstream}
if [ -z "${CLUSTER_WORKERS:-}" ]; then
  if [ "$(nproc)" -ge 4 ]; then CLUSTER_WORKERS=2; else CLUSTER_WORKERS=1; fi
fi

MEMBERS="etcd1 etcd2 etcd3 redis rc up cp dp1 dp2 dp3 client"
declare -A HOST=([etcd1]=11 [etcd2]=12 [etcd3]=13 [redis]=21 [rc]=22 [up]=51
  [cp]=31 [dp1]=41 [dp2]=42 [dp3]=43 [client]=61)

die() { echo "cluster: $*" >&2; exit 1; }
ns() { echo "$TAG-$1"; }
ip_of() { echo "$NET.${HOST[$1]}"; }
inns() { local m=$1; shift; ip netns exec "$(ns "$m")" "$@"; }
etcd_hosts() { echo "http://$(ip_of etcd1):2379 http://$(ip_of etcd2):2379 http://$(ip_of etcd3):2379"; }

need() {
  [ "$(id -u)" = 0 ] || die "needs root (it makes network namespaces)"
  ip netns list >/dev/null 2>&1 || die "needs 'ip netns' (iproute2)"
  local c
  for c in etcd redis-server redis-cli curl setsid timeout; do
    command -v "$c" >/dev/null || die "needs $c"
  done
  [ -x "$COREGATE" ] && [ -x "$UPSTREAM" ] || die "needs $COREGATE and $UPSTREAM (make build)"
}

# wait_for SECONDS WHAT CMD...: runs CMD every 0.1 s until it succeeds.
wait_for() {
  local t=$1 what=$2; shift 2
  local end=$((SECONDS + t))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || die "$what: not ready after ${t}s (logs in $STATE/logs)"
    sleep 0.1
  done
}

# ours PID MEMBER: PID is alive and runs in MEMBER's namespace, so that a
# PID reused by another process is never signalled.
ours() {
  local pid=$1 m=$2
  [ -e "/proc/$pid" ] && [ -e "/run/netns/$(ns "$m")" ] &&
    [ "$(stat -Lc %i "/proc/$pid/ns/net" 2>/dev/null)" = "$(stat -Lc %i "/run/netns/$(ns "$m")")" ]
}

# spawn MEMBER NAME CMD...: starts CMD in MEMBER's namespace in a session
# of its own, its output in logs/NAME.log, its PID in pids/NAME.
spawn() {
  local m=$1 name=$2; shift 2
  mkdir -p "$STATE/logs" "$STATE/pids"
  ip netns exec "$(ns "$m")" setsid "$@" >>"$STATE/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$STATE/pids/$name"
}

# procs NAME: the PIDs of process NAME (pids/<NAME>) and, for a coregate
# node, its workers (the node's other processes, which outlive their
# supervisor by design).
procs() {
  local name=$1 m pid
  m=$(member_of "$name")
  [ -f "$STATE/pids/$name" ] || return 0
  pid=$(cat "$STATE/pids/$name")
  ours "$pid" "$m" && echo "$pid"
  case $m in cp|dp*) [ -e "/run/netns/$(ns "$m")" ] && ip netns pids "$(ns "$m")" | grep -vx "$pid" || true ;; esac
}

member_of() { case $1 in rc*) echo rc ;; *) echo "$1" ;; esac; }

# stop_proc NAME [SIGNAL]: signals NAME's processes, waits up to 10 s, then KILL.
stop_proc() {
  local name=$1 sig=${2:-TERM} m p left
  m=$(member_of "$name")
  local pids
  pids=$(procs "$name" | tr '\n' ' ')
  if [ -n "${pids// /}" ]; then
    # a node's supervisor stops its workers on TERM: signal it alone first
    if [ "$sig" = TERM ]; then kill -TERM "${pids%% *}" 2>/dev/null || true
    else for p in $pids; do kill -"$sig" "$p" 2>/dev/null || true; done; fi
    local end=$((SECONDS + 10))
    while :; do
      left=""
      for p in $pids; do ours "$p" "$m" && [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ] && left="$left $p"; done
      [ -z "$left" ] && break
      if [ $SECONDS -ge $end ]; then
        for p in $left; do kill -KILL "$p" 2>/dev/null || true; done
        sleep 0.2
        break
      fi
      sleep 0.1
    done
  fi
  rm -f "$STATE/pids/$name"
}

write_node_conf() {
  local m=$1 role=$2 dir=$STATE/$1 h
  mkdir -p "$dir"
  {
    echo "# $m: written by scripts/cluster.sh"
    echo "apisix:"
    echo "  node_listen:"
    echo "    - 9080"
    echo "nginx_config:"
    echo "  worker_processes: $CLUSTER_WORKERS"
    echo "  error_log_level: warn"
    echo "  http:"
    echo "    enable_access_log: false"
    echo "deployment:"
    echo "  role: $role"
    if [ "$role" = data_plane ]; then
      echo "  role_data_plane:"
      echo "    config_provider: etcd"
    else
      echo "  role_control_plane:"
      echo "    config_provider: etcd"
      echo "  admin:"
      echo "    admin_key:"
      echo "      - name: admin"
      echo "        key: $ADMIN_KEY"
      echo "        role: admin"
      echo "    allow_admin:"
      echo "      - $NET.0/24"
      echo "    admin_listen:"
      echo "      ip: $(ip_of "$m")"
      echo "      port: 9180"
    fi
    echo "  etcd:"
    echo "    host:"
    for h in $(etcd_hosts); do echo "      - $h"; done
    echo "    prefix: /apisix"
    # seconds an etcd request may take: an Admin API write without quorum
    # is answered within it
    echo "    timeout: 3"
  } >"$dir/config.yaml"
}

start_member() {
  local m=$1 i p
  case $m in
    etcd[123])
      local cl="" e
      for e in etcd1 etcd2 etcd3; do cl="$cl${cl:+,}$e=http://$(ip_of $e):2380"; done
      mkdir -p "$STATE/$m"
      spawn "$m" "$m" etcd --name "$m" --data-dir "$STATE/$m/data" \
        --listen-client-urls "http://$(ip_of "$m"):2379" --advertise-client-urls "http://$(ip_of "$m"):2379" \
        --listen-peer-urls "http://$(ip_of "$m"):2380" --initial-advertise-peer-urls "http://$(ip_of "$m"):2380" \
        --initial-cluster "$cl" --initial-cluster-state new --initial-cluster-token "coregate-$TAG"
      ;;
    redis)
      mkdir -p "$STATE/redis"
      spawn redis redis redis-server --bind "$(ip_of redis)" --port 6379 --save "" --appendonly no \
        --protected-mode no --dir "$STATE/redis" --daemonize no
      ;;
    rc|rc[123])
      mkdir -p "$STATE/rc"
      for i in 1 2 3; do
        [ "$m" = rc ] || [ "$m" = "rc$i" ] || continue
        p=$((7000 + i))
        spawn rc "rc$i" redis-server --bind "$(ip_of rc)" --port "$p" --save "" --appendonly no \
          --protected-mode no --dir "$STATE/rc" --daemonize no --cluster-enabled yes \
          --cluster-config-file "nodes-$p.conf" --cluster-node-timeout 5000
      done
      ;;
    up) spawn up up "$UPSTREAM" -listen "$(ip_of up):1980" ;;
    cp) spawn cp cp "$COREGATE" -c "$STATE/cp/config.yaml" ;;
    dp[123]) spawn "$m" "$m" "$COREGATE" -c "$STATE/$m/config.yaml" ;;
    client) ;;
    *) die "unknown member $m ($MEMBERS rc1 rc2 rc3)" ;;
  esac
}

names_of() { case $1 in rc) echo rc1 rc2 rc3 ;; *) echo "$1" ;; esac; }

# probe MEMBER: succeeds when MEMBER answers.
probe() {
  local m=$1 i
  case $m in
    etcd*) inns "$m" curl -fsS -m 1 "http://$(ip_of "$m"):2379/health" | grep -q '"health":"true"' ;;
    redis) [ "$(inns redis timeout 2 redis-cli -h "$(ip_of redis)" -p 6379 ping 2>/dev/null)" = PONG ] ;;
    rc*)
      for i in 1 2 3; do
        case $m in rc|"rc$i") inns rc timeout 2 redis-cli -h "$(ip_of rc)" -p $((7000 + i)) cluster info 2>/dev/null |
          grep -q 'cluster_state:ok' || return 1 ;; esac
      done
      ;;
    up) inns up curl -fsS -m 1 -o /dev/null "http://$(ip_of up):1980/hello" ;;
    cp) inns cp curl -fsS -m 1 -o /dev/null -H "X-API-KEY: $ADMIN_KEY" "http://$(ip_of cp):9180/apisix/admin/routes" ;;
    dp*) inns "$m" curl -fsS -m 1 -o /dev/null "http://$(ip_of "$m"):9080/cluster-health" ;;
    client) [ -e "/run/netns/$(ns client)" ] ;;
  esac
}

load_env() {
  [ -f "$STATE/cluster.env" ] || die "no cluster in $STATE (scripts/cluster.sh up)"
  # shellcheck disable=SC1091
  . "$STATE/cluster.env"
}

cmd_up() {
  mkdir -p "$STATE/logs" "$STATE/pids"
  : >"$STATE/netns"
  ADMIN_KEY=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
  {
    echo "CLUSTER_TAG=$TAG"
    echo "CLUSTER_STATE=$STATE"
    echo "CLUSTER_WORKERS=$CLUSTER_WORKERS"
    echo "ADMIN_KEY=$ADMIN_KEY"
    echo "ADMIN=http://$(ip_of cp):9180"
    echo "ETCD=$(etcd_hosts | tr ' ' ',')"
    echo "REDIS=$(ip_of redis):6379"
    echo "REDIS_CLUSTER=$(ip_of rc):7001,$(ip_of rc):7002,$(ip_of rc):7003"
    echo "UPSTREAM=$(ip_of up):1980"
    echo "CP=$(ip_of cp):9080"
    echo "DP=$(ip_of dp1):9080,$(ip_of dp2):9080,$(ip_of dp3):9080"
    echo "CLIENT_NS=$(ns client)"
    local m
    for m in $MEMBERS; do echo "NS_$m=$(ns "$m")"; done
  } >"$STATE/cluster.env"
  # The switch: a namespace holding the bridge alone.
  local sw
  sw=$(ns sw)
  # each name is recorded once made: down deletes only what this up made
  ip netns add "$sw"
  echo "$sw" >>"$STATE/netns"
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  for m in $MEMBERS; do
    ip netns add "$(ns "$m")"
    echo "$(ns "$m")" >>"$STATE/netns"
    ip -n "$(ns "$m")" link set lo up
    ip link add eth0 netns "$(ns "$m")" type veth peer name "v-$m" netns "$sw"
    ip -n "$sw" link set "v-$m" master br0 up
    ip -n "$(ns "$m")" addr add "$(ip_of "$m")/24" dev eth0
    ip -n "$(ns "$m")" link set eth0 up
  done
  write_node_conf cp control_plane
  for m in dp1 dp2 dp3; do write_node_conf "$m" data_plane; done

  for m in etcd1 etcd2 etcd3 redis rc up; do start_member "$m"; done
  for m in etcd1 etcd2 etcd3; do wait_for 30 "$m" probe "$m"; done
  wait_for 10 redis probe redis
  local i
  for i in 1 2 3; do
    wait_for 10 "rc$i" inns rc redis-cli -h "$(ip_of rc)" -p $((7000 + i)) ping
  done
  inns rc redis-cli --cluster create "$(ip_of rc):7001" "$(ip_of rc):7002" "$(ip_of rc):7003" \
    --cluster-replicas 0 --cluster-yes >>"$STATE/logs/rc-create.log" 2>&1 ||
    die "redis-cli --cluster create failed (logs in $STATE/logs/rc-create.log)"
  wait_for 20 "redis cluster" probe rc
  wait_for 10 upstream probe up
  for m in cp dp1 dp2 dp3; do start_member "$m"; done
  wait_for 30 "control plane" probe cp
  # A route every data plane serves once it has read etcd: the health probe.
  inns cp curl -fsS -m 5 -o /dev/null -X PUT -H "X-API-KEY: $ADMIN_KEY" \
    "http://$(ip_of cp):9180/apisix/admin/routes/cluster-health" \
    -d "{\"uri\":\"/cluster-health\",\"upstream\":{\"type\":\"roundrobin\",\"nodes\":{\"$(ip_of up):1980\":1}}}" ||
    die "PUT of the health route failed"
  for m in dp1 dp2 dp3; do wait_for 30 "$m" probe "$m"; done
  echo "cluster: up, state in $STATE ($CLUSTER_WORKERS workers per node)"
}

cmd_down() {
  [ "$(id -u)" = 0 ] || die "needs root"
  [ -d "$STATE" ] || { echo "cluster: nothing in $STATE"; return 0; }
  local f name
  # coregate nodes first (their upstream and etcd still there), then the rest
  for name in cp dp1 dp2 dp3 up redis rc1 rc2 rc3 etcd1 etcd2 etcd3; do
    [ -f "$STATE/pids/$name" ] && stop_proc "$name"
  done
  for f in "$STATE"/pids/*; do [ -f "$f" ] && stop_proc "$(basename "$f")"; done
  if [ -f "$STATE/netns" ]; then
    local n p
    while read -r n; do
      [ -n "$n" ] && [ -e "/run/netns/$n" ] || continue
      # anything left inside a namespace this script made was started by it
      for p in $(ip netns pids "$n" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
      ip netns del "$n" 2>/dev/null || true
    done <"$STATE/netns"
    rm -f "$STATE/netns"
  fi
  rm -rf "$STATE"/etcd[123] "$STATE/redis" "$STATE/rc" "$STATE"/cp "$STATE"/dp[123] "$STATE/pids" "$STATE/cluster.env"
  echo "cluster: down (logs kept in $STATE/logs)"
}

cmd_status() {
  load_env
  local m name pid st rc=0
  printf '%-8s %-16s %-10s %s\n' MEMBER ADDRESS PID STATUS
  for m in $MEMBERS; do
    [ "$m" = client ] && continue
    pid=""
    for name in $(names_of "$m"); do
      [ -f "$STATE/pids/$name" ] && pid="$pid${pid:+,}$(cat "$STATE/pids/$name")"
    done
    if [ -e "/run/netns/$(ns "$m")" ] && probe "$m" >/dev/null 2>&1; then
      st=answers
    else
      st="does not answer"
      rc=1
    fi
    printf '%-8s %-16s %-10s %s\n' "$m" "$(ip_of "$m")" "${pid:--}" "$st"
  done
  return $rc
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
  up)
    need
    if [ -s "$STATE/netns" ]; then
      die "a cluster is recorded in $STATE already (scripts/cluster.sh down first)"
    fi
    if ip netns list | grep -q "^$TAG-"; then
      die "namespaces $TAG-* exist already: another cluster's (CLUSTER_TAG chooses another prefix)"
    fi
    # whatever fails half-way, what was started is stopped
    trap 'rc=$?; [ $rc = 0 ] || { echo "cluster: up failed; stopping what it started" >&2; cmd_down >&2 || true; }' EXIT
    cmd_up
    trap - EXIT
    ;;
  down) cmd_down ;;
  status) cmd_status ;;
  stop)
    [ $# -ge 1 ] || die "stop MEMBER [SIGNAL]"
    load_env
    for name in $(names_of "$1"); do stop_proc "$name" "${2:-TERM}"; done
    ;;
  start)
    [ $# -ge 1 ] || die "start MEMBER"
    load_env
    for name in $(names_of "$1"); do
      if [ -n "$(procs "$name")" ]; then die "$name runs already"; fi
    done
    start_member "$1"
    ;;
  link)
    [ $# -eq 2 ] || die "link MEMBER down|up"
    load_env
    case $2 in down|up) ;; *) die "link MEMBER down|up" ;; esac
    ip -n "$(ns sw)" link set "v-$1" "$2"
    ;;
  exec)
    [ $# -ge 2 ] || die "exec MEMBER CMD..."
    load_env
    m=$1
    shift
    exec ip netns exec "$(ns "$(member_of "$m")")" "$@"
    ;;
  *) die "usage: scripts/cluster.sh [--state DIR] up|down|status|stop MEMBER [SIG]|start MEMBER|link MEMBER down|up|exec MEMBER CMD..." ;;
esac
