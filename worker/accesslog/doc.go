// Package accesslog is the gateway's access log: nginx's log_format
// compiled once per configuration into literal and variable parts
// (Compile), the escaping of variable values (AppendValue), and a file
// written off the event loop from per-worker buffers (Log).
//
// A format's variables are those of httpvar's table, resolved by
// httpvar.Parse when the format is compiled; an unknown one is an error.
// The worker renders the log's own (times, sizes, statuses, $request_id,
// $sent_http_NAME...) itself and reads the others as route vars and
// plugins read them, so that $args, $arg_NAME or $http_NAME have one
// value per request wherever they are named. A value that is not set is
// written "-" (nothing with escape=json), as nginx does; escape=json
// escapes as nginx's ngx_escape_json (internal/jsonesc's Nginx style).
//
// A worker renders one line per request into its Log's current buffer
// (Log.Line, Log.Commit), on its event loop and without allocating. A full
// buffer, or one that has waited Flush, is handed to the Log's writer
// goroutine, which writes it to the file (opened with O_APPEND, so that the
// whole lines of several workers' buffers never interleave) and hands the
// buffer back. The loop never writes to the file and never waits for the
// writer: when every buffer is with the writer, lines are dropped and
// counted (Log.Dropped), the writer logging a warning, as a disk that cannot
// keep up must not stall requests. Reopen (SIGUSR1, after logrotate renamed
// the file) has the writer open the path again between two writes.
package accesslog
