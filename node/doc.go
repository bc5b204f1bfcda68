// Package node holds what the node's two processes share: the supervisor
// (package supervisor: the worker processes, the configuration's source,
// the Admin API) and each worker (package workerproc: one event loop).
// Both log at nginx_config.error_log_level (NewLogger, SetLogLevel), agree
// on the fingerprint of the settings a worker reads from config.yaml
// (Settings), check the access log's format the same way (AccessLogFormat),
// and serve net/http/pprof when asked to (ServePprof). The supervisor's
// pid file (CreatePIDFile, locked while it runs) is what `coregate -s`
// signals through (SignalPIDFile, Signals).
//
// cmd/coregate parses the command lines and calls into the two processes'
// packages; nothing outside cmd/ and node/ imports node/ (cmd/layering).
package node
