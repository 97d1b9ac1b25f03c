package preload

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// The converter gives way to the traced program by sleeping, not by a
// nice value. At nice 19 it took the region's mutex like any thread, and
// a busy machine could leave it waiting for a CPU for seconds while it
// held it, in the middle of a pass (loading a file's symbols, compressing
// a block): the boost, at memtrace's priority, then waited for it, the
// copies and the region filled, and the program lost records after its
// bounded wait (TestPreloadStackTableThreadChurn under three busy loops).
// No unprivileged process can raise a thread's priority again, so the
// thread now runs at memtrace's priority and, after a pass, sleeps in
// proportion to the CPU it used whenever the kernel made it wait for one:
// it only ever waits between passes, holding nothing.

// schedstatSelf is the calling thread's scheduler figures: its CPU time
// and its time waiting on a run queue, in ns.
const schedstatSelf = "/proc/thread-self/schedstat"

// yieldRatio: with the CPU contended, the converter sleeps this many times
// the CPU it used, so that it takes about a sixth of a CPU it shares with
// the program. yieldMax bounds one sleep: the copies must not fill while
// it sleeps (the boost takes over past three quarters).
const (
	yieldRatio = 4
	yieldMax   = 20 * time.Millisecond
)

// yielder reads one thread's schedstat; the zero value (no file: a kernel
// without scheduler statistics) never sleeps.
type yielder struct {
	f           *os.File
	ran, waited uint64
	buf         [96]byte
}

// newYielder opens path, the schedstat of the thread that will call
// pause (open it on that thread: thread-self names the opener).
func newYielder(path string) *yielder {
	y := &yielder{}
	f, err := os.Open(path)
	if err != nil {
		return y
	}
	y.f = f
	y.ran, y.waited, _ = y.read()
	return y
}

func (y *yielder) close() {
	if y.f != nil {
		y.f.Close()
		y.f = nil
	}
}

func (y *yielder) read() (ran, waited uint64, ok bool) {
	if y.f == nil {
		return 0, 0, false
	}
	n, _ := y.f.ReadAt(y.buf[:], 0) // io.EOF with the whole file
	return parseSchedstat(y.buf[:n])
}

// parseSchedstat reads schedstat's first two numbers: the CPU time and the
// time waiting on a run queue.
func parseSchedstat(b []byte) (ran, waited uint64, ok bool) {
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, 0, false
	}
	r, err1 := strconv.ParseUint(string(f[0]), 10, 64)
	w, err2 := strconv.ParseUint(string(f[1]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return r, w, true
}

// pause is how long to sleep now: none while the thread got a CPU when it
// wanted one (it waited on a run queue for less than half the time it
// ran since the last call), else yieldRatio times what it ran, at most
// yieldMax.
func (y *yielder) pause() time.Duration {
	ran, waited, ok := y.read()
	if !ok {
		return 0
	}
	back := ran < y.ran || waited < y.waited
	dr, dw := ran-y.ran, waited-y.waited
	y.ran, y.waited = ran, waited
	if back || dw*2 < dr {
		return 0
	}
	return min(time.Duration(dr*yieldRatio), yieldMax)
}
