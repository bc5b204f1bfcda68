package worker

import "github.com/panjf2000/gnet/v2"

// Read back-pressure. gnet reads every readable connection into an unbounded
// inbound buffer; a proxy must stop reading the side that produces faster
// than the other side consumes, or a fast uploader (or origin) behind a slow
// peer grows memory without bound.
//
// pauseRead takes the connection out of the loop's read interest
// (gnet.PauseRead, of the carried gnet: epoll_ctl(EPOLL_CTL_MOD) on the
// loop's own epoll instance); resumeRead puts it back. The loop is edge-
// triggered (worker.go), so a pause holds until resumeRead: gnet neither
// reads the rest of a read that filled its buffer nor turns reading back on
// when it flushes the connection's output, and data that arrived meanwhile
// is reported at the next poll after the resume. Pausing a paused
// connection, or resuming one that is not paused, costs nothing.

func (w *Worker) pauseRead(c gnet.Conn) { _ = gnet.PauseRead(c) }

func (w *Worker) resumeRead(c gnet.Conn) { _ = gnet.ResumeRead(c) }
