package agent

import (
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/logfmt"
)

// exitStatusWait bounds how long the exit line of the program memtrace
// started waits for its wait status: the kernel's exit event comes before
// the process can be reaped, and a main thread that exits before its
// other threads leaves the process unreaped for as long as they run.
const exitStatusWait = 500 * time.Millisecond

// exitStatuses are the wait statuses of the processes memtrace started:
// the launcher learns them from wait(2), since the tracer's exit event
// carries none, and hands them over from its waiting goroutine.
type exitStatuses struct {
	mu sync.Mutex
	st map[uint32]logfmt.Proc // HasStatus/Status or Signal
	ch map[uint32]chan struct{}
	// expect: processes started by a launcher that does not go through
	// Released (the LD_PRELOAD path), whose status SetExitStatus brings.
	expect map[uint32]bool
}

func (x *exitStatuses) chanFor(pid uint32) chan struct{} {
	if x.ch == nil {
		x.ch, x.st = map[uint32]chan struct{}{}, map[uint32]logfmt.Proc{}
	}
	c, ok := x.ch[pid]
	if !ok {
		c = make(chan struct{})
		x.ch[pid] = c
	}
	return c
}

// SetExitStatus gives the wait status of pid, a process memtrace started,
// for its exit line (status=N, or signal=NAME). Safe to call from any
// goroutine.
func (s *Session) SetExitStatus(pid uint32, ps *os.ProcessState) {
	if ps == nil {
		return
	}
	var p logfmt.Proc
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		p.Signal = unix.SignalName(ws.Signal())
		if p.Signal == "" {
			p.Signal = "signal " + ws.Signal().String()
		}
	} else if c := ps.ExitCode(); c >= 0 {
		p.HasStatus, p.Status = true, c
	} else {
		return
	}
	x := &s.exits
	x.mu.Lock()
	defer x.mu.Unlock()
	c := x.chanFor(pid)
	if _, done := x.st[pid]; done {
		return
	}
	x.st[pid] = p
	close(c)
}

// ExpectExitStatus says that SetExitStatus will give pid's wait status, for
// a launcher the agent does not see release the program (the LD_PRELOAD
// path, whose library reports the exit before the process is reaped).
// Call it before the events of pid reach the session.
func (s *Session) ExpectExitStatus(pid uint32) {
	x := &s.exits
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.expect == nil {
		x.expect = map[uint32]bool{}
	}
	x.expect[pid] = true
}

// exitLine is the proc event=exit line of pid at ts, with the process's
// exit status or signal when it is one memtrace started (waiting, at most
// exitStatusWait, for the launcher to reap it).
func (s *Session) exitLine(pid uint32, ts uint64) logfmt.Proc {
	line := logfmt.Proc{Event: logfmt.ProcExit, PID: int64(pid), TS: ts}
	x := &s.exits
	x.mu.Lock()
	expected := x.expect[pid]
	x.mu.Unlock()
	if p := s.procs[pid]; !expected && (p == nil || p.released == 0) {
		return line // not started by memtrace: nobody here can wait for it
	}
	x.mu.Lock()
	c := x.chanFor(pid)
	x.mu.Unlock()
	select {
	case <-c:
	case <-time.After(exitStatusWait):
		return line
	}
	x.mu.Lock()
	st := x.st[pid]
	x.mu.Unlock()
	line.HasStatus, line.Status, line.Signal = st.HasStatus, st.Status, st.Signal
	return line
}
