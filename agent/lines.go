package agent

import "github.com/memtrace/memtrace/logfmt"

// Proc writes a process line the runner knows of and the events do not
// tell: a process attached to (-p), one memtrace could not probe. Lines
// go in as records, never as bytes, so that logfmt alone decides their
// layout. It does not touch s.buf: a runner may call it from OnProcess,
// whatever the session was writing.
func (s *Session) Proc(p logfmt.Proc) {
	s.noteProc(&p)
	var a [256]byte
	s.write(logfmt.AppendProc(a[:0], p))
}
