package main

import "coregate/node/supervisor"

// The names of the node's files beside config.yaml, and of the flag that
// accepts a reset store, as the supervisor has them.
const (
	etcdDataDir     = supervisor.EtcdDataDir
	adminKeysFile   = supervisor.AdminKeysFile
	acceptResetFlag = supervisor.AcceptResetFlag
)
