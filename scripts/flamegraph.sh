#!/usr/bin/env bash
# flamegraph.sh: CPU flame graph of a coregate worker under a bench scenario.
#
# It starts the upstream and coregate (no plugins, ROUTES routes, WORKERS
# workers) with COREGATE_PPROF on a loopback port, drives closed-loop load
# at /hello, takes a CPU profile from the worker's net/http/pprof listener,
# folds the stacks with "go tool pprof -traces" and renders an SVG with
# stackvis (an existing flame graph renderer, installed by make bench-deps).
#
# Usage: scripts/flamegraph.sh [-r ROUTES | -S SCENARIO] [-w WORKERS] [-s SECONDS] [-o OUT.svg]
#                              [-t coregate|upstream] [-a PPROF_ADDR -u URL]
#   -S     a scenario of "bench/.bin/bench run -list" (its routes, plugins,
#          consumers and load; a redis-server for the Redis rows) instead of
#          ROUTES routes without plugins
#   -a/-u  attach to a gateway already running with COREGATE_PPROF=PPROF_ADDR,
#          loading URL (http://127.0.0.1:PORT/hello) while profiling
#   -t upstream  profile the bench upstream instead (checks the tooling)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
routes=1 workers=1 seconds=10 out=bench/results/flamegraph.svg target=coregate attach="" url="" scen=""
while getopts "r:S:w:s:o:t:a:u:h" opt; do
	case $opt in
	r) routes=$OPTARG ;;
	S) scen=$OPTARG ;;
	w) workers=$OPTARG ;;
	s) seconds=$OPTARG ;;
	o) out=$OPTARG ;;
	t) target=$OPTARG ;;
	a) attach=$OPTARG ;;
	u) url=$OPTARG ;;
	*) sed -n '2,19p' "$0"; exit 2 ;;
	esac
done
stackvis=bench/.tools/node_modules/.bin/stackvis
if [ ! -x "$stackvis" ]; then
	command -v stackvis >/dev/null && stackvis=$(command -v stackvis) || {
		echo "flamegraph.sh: stackvis not found: run make bench-deps" >&2
		exit 1
	}
fi
mkdir -p bench/.bin "$(dirname "$out")"
go build -o bench/.bin/bench ./bench/cmd/bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prof=$tmp/cpu.pprof
bin=""
if [ -n "$attach" ]; then
	[ -n "$url" ] || { echo "flamegraph.sh: -a needs -u URL" >&2; exit 2; }
	bench/.bin/bench load -q -c 16 -d "$((seconds + 2))s" "$url" >"$tmp/load.txt" &
	loadpid=$!
	sleep 1
	curl -fsS -o "$prof" "http://$attach/debug/pprof/profile?seconds=$seconds"
	wait "$loadpid"
	cat "$tmp/load.txt" >&2
elif [ "$target" = upstream ]; then
	bench/.bin/bench profile -target upstream -seconds "$seconds" -out "$prof"
	bin=bench/.bin/bench
else
	go build -o bin/coregate ./cmd/coregate
	bench/.bin/bench profile -target coregate -coregate bin/coregate -routes "$routes" -scenario "$scen" \
		-workers "$workers" -seconds "$seconds" -out "$prof"
	bin=bin/coregate
fi
# "go tool pprof -traces" prints each sampled stack leaf first, separated by
# dashed lines, with its time on the first line; fold them root first into
# stackvis's collapsed format (frames joined by commas, then a count).
go tool pprof -traces $bin "$prof" 2>/dev/null | awk '
	function flush() {
		if (n > 0) {
			s = ""
			for (i = n; i >= 1; i--) s = s (s == "" ? "" : ",") f[i]
			w[s] += v
		}
		n = 0
	}
	/^-----------\+/ { flush(); next }
	/^ +[0-9.]+(ns|us|ms|s) +/ {
		flush()
		t = $1; v = t + 0
		if (t ~ /ns$/) v /= 1e6; else if (t ~ /us$/) v /= 1e3; else if (t ~ /[^m]s$/) v *= 1e3
		v = int(v + 0.5)  # milliseconds
		sub(/^ +[^ ]+ +/, ""); gsub(/,/, ";"); f[++n] = $0; next
	}
	/^ {10,}[^ ]/ && n > 0 { sub(/^ +/, ""); gsub(/,/, ";"); f[++n] = $0; next }
	END { flush(); for (s in w) if (w[s] > 0) print s, w[s] }
' >"$tmp/folded.txt"
if [ ! -s "$tmp/folded.txt" ]; then
	echo "flamegraph.sh: the profile holds no samples" >&2
	exit 1
fi
"$stackvis" collapsed flamegraph-svg <"$tmp/folded.txt" >"$out"
cp "$prof" "${out%.svg}.pprof"
echo "flame graph: $out (profile: ${out%.svg}.pprof; go tool pprof -http=127.0.0.1:0 ${out%.svg}.pprof to browse)"
