package shm

import "coregate/plugins"

var _ plugins.Counters = (*Table)(nil)
