package launch

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/runner"
	"github.com/memtrace/memtrace/tracer"
)

// The test binary stands in for memtrace where launch re-executes itself
// (os.Executable): as the exec shim and as the watchdog, with the same
// init lock cmd/memtrace's main has, so that launch runs end to end
// without a memtrace binary.
func init() {
	if len(os.Args) > 1 && os.Args[1] == ShimArg {
		runtime.LockOSThread()
	}
}

// helperEnv makes the test binary a helper process that runs one thing
// and prints its outcome: a check as another user (checkattach:PID), or
// launch where a signal may end it (launch, with helperArgsEnv's options).
const (
	helperEnv     = "MEMTRACE_LAUNCH_TEST_HELPER"
	helperArgsEnv = "MEMTRACE_LAUNCH_TEST_OPTIONS"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case ShimArg:
			RunShim()
		case WatchdogArg:
			RunWatchdog()
		}
	}
	switch h := os.Getenv(helperEnv); {
	case strings.HasPrefix(h, "checkattach:"):
		pid, _ := strconv.Atoi(strings.TrimPrefix(h, "checkattach:"))
		fmt.Print(checkAttachable(pid))
		os.Exit(0)
	case h == "launch":
		// launch as memtrace runs it, Ctrl-C caught, with a fake
		// tracer: the options come as JSON, the outcome and the
		// shim's PID go to stdout.
		var o Options
		if err := json.Unmarshal([]byte(os.Getenv(helperArgsEnv)), &o); err != nil {
			fmt.Println("bad options:", err)
			os.Exit(2)
		}
		runner.CatchInterrupts()
		fake := newFake()
		status, err := launch(&o, fake, os.Stderr)
		fmt.Printf("status=%d err=%v calls=%q\n", status, err, fake.callList())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeTracer is the eBPF tracer's part that the loop talks to, fed events
// by the test and recording what the loop asked of it.
type fakeTracer struct {
	mu       sync.Mutex
	queue    []event.Event
	closed   bool
	lost     uint64
	session  bool
	multi    bool
	fellBack []string
	scanErr  map[int]error
	scanned  []string // what ScanProcess reports as probed
	attachOK bool
	attachE  error
	addErr   error
	calls    []string
}

func newFake() *fakeTracer {
	return &fakeTracer{scanErr: map[int]error{}, attachOK: true, session: true, multi: true}
}

func (f *fakeTracer) call(format string, a ...any) {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf(format, a...))
	f.mu.Unlock()
}

// push queues events for the next Read.
func (f *fakeTracer) push(evs ...event.Event) {
	f.mu.Lock()
	f.queue = append(f.queue, evs...)
	f.mu.Unlock()
}

func (f *fakeTracer) setLost(n uint64) {
	f.mu.Lock()
	f.lost = n
	f.mu.Unlock()
}

// Read hands over what is queued, as the ring reader does; with nothing
// queued it waits a little, as the real one waits for PollInterval.
func (f *fakeTracer) Read(h event.Handler) error {
	f.mu.Lock()
	evs, closed := f.queue, f.closed
	f.queue = nil
	f.mu.Unlock()
	for i := range evs {
		h.Event(&evs[i])
	}
	if len(evs) == 0 {
		if closed {
			return ringbuf.ErrClosed
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

func (f *fakeTracer) Lost() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lost
}
func (f *fakeTracer) Session() bool      { return f.session }
func (f *fakeTracer) Multi() bool        { return f.multi }
func (f *fakeTracer) FellBack() []string { return f.fellBack }
func (f *fakeTracer) AddProcess(pid int) error {
	f.call("add %d", pid)
	return f.addErr
}
func (f *fakeTracer) ScanProcess(pid int) ([]string, error) {
	f.call("scan %d", pid)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.scanErr[pid]; err != nil {
		return nil, err
	}
	return f.scanned, nil
}
func (f *fakeTracer) AttachLibrary(pid int, path string) (bool, error) {
	f.call("attach %d %s", pid, path)
	return f.attachOK, f.attachE
}
func (f *fakeTracer) Resume(pid int, key uint32) error { f.call("resume %d", pid); return nil }
func (f *fakeTracer) ReleaseProcess(pid int) {
	f.call("release %d", pid)
}
func (f *fakeTracer) Detach() { f.call("detach") }
func (f *fakeTracer) ProgramStats() []tracer.ProgramStat {
	return []tracer.ProgramStat{{Name: "mt_fake", Runs: 4, Runtime: 400 * time.Nanosecond}}
}
func (f *fakeTracer) UnwindUsage() (uint32, uint32, int) { return 0, 0, 0 }
func (f *fakeTracer) WalkReuse() (uint64, uint64)        { return 0, 0 }

// callList is the calls so far.
func (f *fakeTracer) callList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// waitCall waits (bounded) until the fake has seen call c.
func (f *fakeTracer) waitCall(t *testing.T, c string) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		for _, got := range f.callList() {
			if got == c {
				return
			}
		}
	}
	t.Fatalf("no %q call in 5 s; calls: %q", c, f.callList())
}
