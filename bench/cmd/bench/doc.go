// Command bench is coregate's benchmark harness. Subcommands:
//
//	bench run      start upstream, coregate and nginx on loopback, measure every
//	               scenario in interleaved rounds, write bench/results/
//	bench pair     coregate against nginx (or another build) on one CPU, loaded
//	               in turn in short ABBA rounds: the median ratio of CPU per request
//	bench upstream serve the fixed 1 KiB (or 10-byte) body on one event loop
//	bench floor    the I/O floor: a proxy loop that does nothing but the I/O
//	bench load     drive load at a URL, closed loop or fixed rate, like wrk / wrk2
//	bench profile  run a scenario and save a CPU profile of the gateway
//	bench report   re-render a results.json into Markdown and SVG
//	bench config   write a scenario's config.yaml, apisix.yaml and nginx.conf
//
// "bench <subcommand> -h" lists each one's flags. bench/run builds and
// starts "bench run"; scripts/flamegraph.sh uses "bench profile".
package main
