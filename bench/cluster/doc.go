// Package cluster holds the scenarios of make cluster-test: coregate past
// one machine, run on one machine in network namespaces that
// scripts/cluster.sh makes (bench/cmd/cluster brings the cluster up and
// down and runs the scenarios from its client namespace).
//
// Each scenario drives the cluster through the control plane's Admin API
// and the three data planes' proxies, injects its faults with the script
// (a member stopped or started, a namespace's link set down) and adds its
// figures to a Report, each against the target issue 41 sets; a figure
// off its target fails the run. Every wait and every load is bounded in
// time and in count.
//
// The types here may be used from several goroutines where they say so;
// a Load's results are its own until Stop returns them.
package cluster
