package preload

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"time"
)

// binRun is the binary mode: the library appends records to a shared
// region and this process converts them into the Session while the
// program runs (see shm.go and convert.go).
type binRun struct {
	reg  *region
	conv *converter // made in Source.Trace
	stop chan struct{}
	// runDone, boostDone, copyDone: the converter's two loops and the
	// copier's have returned.
	runDone, boostDone, copyDone chan struct{}
	// gcDone: gcHeadroom has returned.
	gcDone chan struct{}
	// started: the converter goroutine runs and must be waited for.
	started bool
}

// startBinary creates the region and sets up cmd: the region as fd 3 and
// in the environment; size and thread filters and the output are the
// Session's, so the library is not told about them, nor about a viewer.
func startBinary(opts Options, cmd *exec.Cmd) (*binRun, error) {
	reg, err := newRegion(opts.SharedMemory)
	if err != nil {
		return nil, fmt.Errorf("%w (or run with the library's text mode)", err)
	}
	b := &binRun{reg: reg, stop: make(chan struct{})}
	var env []string
	for _, kv := range cmd.Env {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "MEMTRACK_MIN_SIZE", "MEMTRACK_TRACK_THREADS", "MEMTRACK_OUTPUT", "MEMTRACK_PORT", "MEMTRACE_LISTEN":
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = append(env, reg.env)
	cmd.ExtraFiles = []*os.File{reg.f}
	return b, nil
}

// liveRuns counts the runs under way, so that the GC percent from
// before the first comes back after the last (gcHeadroom changes it).
var liveRuns struct {
	sync.Mutex
	n       int
	percent int // the GC percent before the first run
}

func addLiveRun(d int) {
	liveRuns.Lock()
	defer liveRuns.Unlock()
	was := liveRuns.n
	liveRuns.n += d
	switch {
	case was == 0 && liveRuns.n > 0:
		liveRuns.percent = debug.SetGCPercent(100)
		debug.SetGCPercent(liveRuns.percent)
	case was > 0 && liveRuns.n == 0:
		if os.Getenv("GOGC") == "" {
			debug.SetGCPercent(liveRuns.percent)
		}
	}
}

// gcHeadroom keeps the collector's goal at least gcRoom above the live
// heap, up to gcMaxPercent, while stop is open: a small heap would
// otherwise be collected every few MB that the formatting allocates, each
// collection a stop of memtrace's world, the copier's too, while the
// library writes into fresh chunks (copy.go). A heap larger than gcRoom
// is collected as GOGC=100 does.
func gcHeadroom(stop <-chan struct{}) {
	if os.Getenv("GOGC") != "" {
		return
	}
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindUint64 {
			live := max(s[0].Value.Uint64(), 1<<20)
			debug.SetGCPercent(int(min(max(gcRoom*100/live, 100), gcMaxPercent)))
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

const (
	gcRoom       = 64 << 20
	gcMaxPercent = 800
)

func (b *binRun) start() {
	b.started = true
	addLiveRun(1)
	b.gcDone = make(chan struct{})
	go func() {
		gcHeadroom(b.stop)
		close(b.gcDone)
	}()
	b.conv.startTables()
	b.runDone = make(chan struct{})
	b.boostDone = make(chan struct{})
	b.copyDone = make(chan struct{})
	go func() {
		// At memtrace's priority: the copier keeps the region's chunks
		// few, so that the program writes into pages it has touched
		// (copy.go); it costs a memcpy of each record.
		b.conv.k.run(b.stop)
		close(b.copyDone)
	}()
	go func() {
		// The converter yields to the traced program (yield.go), on a
		// thread of its own whose scheduling delays it reads. The
		// goroutine ends locked to it, so the thread ends with it.
		runtime.LockOSThread()
		b.conv.run(b.stop, newYielder(schedstatSelf))
		close(b.runDone)
	}()
	go func() {
		b.conv.boost(b.stop)
		close(b.boostDone)
	}()
}

// finish drains the region once the program has exited and completes the
// log (its summary line), at memtrace's own priority: memtrace's end is
// what the user waits for.
func (b *binRun) finish() {
	if b == nil || b.stop == nil {
		return
	}
	if b.conv == nil {
		// Closed before Trace made the converter (the log could not
		// be opened): there is nothing to drain.
		close(b.stop)
		b.stop = nil
		return
	}
	b.conv.handOff.Store(true)
	close(b.stop)
	if b.started {
		<-b.runDone
		<-b.boostDone
		<-b.copyDone
		<-b.gcDone
		addLiveRun(-1)
		b.conv.handOff.Store(false)
		b.conv.drain()
	}
	b.stop = nil
}

// detach ends the log now, while the program runs on: the library's hooks
// go quiet, what they committed before this moment is written, and the
// summary follows (see converter.finish).
func (b *binRun) detach() {
	b.conv.detachAt = monoNow()
	b.finish()
}

// close releases what finish did not (the run ending early): the
// converter is stopped before the region is unmapped under it.
func (b *binRun) close() {
	if b == nil {
		return
	}
	b.finish()
	b.reg.close()
}
