package agent

import (
	"github.com/memtrace/memtrace/internal/stackz"
)

// asyncOut writes the session's full buffers on a goroutine of its own,
// so that compressing one buffer and formatting the next run on two CPUs.
// It is for the end of a run only (Session.Concurrent): while the traced
// program runs, a second busy goroutine takes the CPU the program needs
// (measured slower, docs/measurements.md), but once it is gone both CPUs
// are the agent's.
type asyncOut struct {
	jobs chan outJob
	free chan outJob
	done chan struct{}
	// err is the first write error, read once done is closed; each
	// buffer that comes back carries it as it was then.
	err  error
	made int // buffers allocated besides the session's own
}

type outJob struct {
	out   []byte
	marks []stackz.Mark
	err   error
}

// Concurrent makes the session write its full buffers on another
// goroutine from now until the next Flush, which waits for them: call it
// when the traced programs are gone and what is left is to drain.
func (s *Session) Concurrent() {
	if s.async != nil || s.err != nil || s.cfg.NoText {
		return
	}
	a := &asyncOut{jobs: make(chan outJob, 1), free: make(chan outJob, 3), done: make(chan struct{})}
	s.async = a
	if cw, ok := s.w.(stackz.ConcurrentWriter); ok {
		// The compressor's own helpers (the checksum) may take the
		// formatting's CPU when it waits.
		cw.Concurrent()
	}
	go func() {
		var err error
		defer func() { a.err = err; close(a.done) }()
		for j := range a.jobs {
			if err == nil {
				err = s.writeOut(j.out, j.marks)
			}
			a.free <- outJob{out: j.out[:0], marks: j.marks[:0], err: err}
		}
	}()
}

// handOff gives the full buffer to the writer goroutine and takes an
// empty one: one being written, one queued, one being filled.
func (s *Session) handOff() {
	a := s.async
	a.jobs <- outJob{out: s.out, marks: s.marks}
	s.apart = 0
	var j outJob
	select {
	case j = <-a.free:
	default:
		if a.made < 2 {
			a.made++
			s.out = make([]byte, 0, cap(s.out))
			s.marks = make([]stackz.Mark, 0, cap(s.marks))
			return
		}
		j = <-a.free
	}
	s.out, s.marks = j.out, j.marks
	// A failed write stops the formatting here, as it does when the
	// session writes itself.
	if j.err != nil && s.err == nil {
		s.err = j.err
	}
}

// syncOut waits for the buffers handed off and goes back to writing
// in the caller's goroutine.
func (s *Session) syncOut() {
	a := s.async
	if a == nil {
		return
	}
	close(a.jobs)
	<-a.done
	s.async = nil
	if s.err == nil {
		s.err = a.err
	}
}
