// Command cluster runs coregate as a cluster on one machine and judges it
// (make cluster-test): scripts/cluster.sh up brings up, in network
// namespaces of their own, a 3-member etcd cluster, Redis and a Redis
// Cluster, a control plane and three data planes (the real bin/coregate)
// and an upstream; the scenarios (package bench/cluster) run against it
// from the cluster's client namespace; the table of figures is printed;
// scripts/cluster.sh down stops everything, also when a scenario fails,
// the run is interrupted or it runs past its limit (15 min, 8 with
// -short). It exits 1 when a scenario failed, 2 when it could not run.
//
//	cluster [-short] [-run propagation,...] [-keep]
//
// It needs root and ip netns, and refuses to start without them, saying
// so. CLUSTER=short is -short. "cluster scenarios" is the part that runs
// inside the client namespace.
package main
