package main

// The gateway's plugins, registered in plugins.Default for the Admin API's
// checks and for the workers' builds (one binary: the supervisor and its
// workers alike).
import _ "coregate/plugins/all"
