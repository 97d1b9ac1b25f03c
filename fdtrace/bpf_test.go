//go:build amd64 || arm64

package fdtrace

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/agent"
	"github.com/memtrace/memtrace/config"
	"github.com/memtrace/memtrace/event/fdevent"
	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/logfmt"
)

func requireBPF(t testing.TB) {
	t.Helper()
	bpftest.Require(t)
}

// drain reads until a Read delivers nothing: after the traced program has
// exited, everything it caused is already in the ring.
func drain(t *testing.T, tr *Tracer) []fdevent.Event {
	t.Helper()
	var evs []fdevent.Event
	for {
		n := 0
		if err := tr.Read(func(e *fdevent.Event) { evs = append(evs, *e); n++ }); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return evs
		}
	}
}

// testRun drives fd_test_enter / fd_test_exit in the calling thread, the
// way sys_enter and sys_exit would for a syscall nr(a0..a3) returning ret.
type testRun struct {
	t  *testing.T
	tr *Tracer
}

func (r testRun) call(nr uint32, ret int64, a ...uint64) []fdevent.Event {
	r.t.Helper()
	r.enter(nr, a...)
	return r.exit(ret)
}

func (r testRun) enter(nr uint32, a ...uint64) {
	r.t.Helper()
	ctx := make([]uint64, 5)
	ctx[0] = uint64(nr)
	copy(ctx[1:], a)
	if _, err := r.tr.objs.TestEnter.Run(&ebpf.RunOptions{Context: ctx}); err != nil {
		r.t.Fatalf("test run of the entry program: %v", err)
	}
}

func (r testRun) exit(ret int64) []fdevent.Event {
	r.t.Helper()
	if _, err := r.tr.objs.TestExit.Run(&ebpf.RunOptions{Context: []uint64{uint64(ret)}}); err != nil {
		r.t.Fatalf("test run of the exit program: %v", err)
	}
	return drain(r.t, r.tr)
}

func newTestRun(t *testing.T, track config.Track) testRun {
	requireBPF(t)
	// Entry and exit share per-thread state: both runs must happen in
	// the same thread, which is also the one whose memory is read.
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	tr, err := newTracer(Options{Track: track}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	if err := tr.AddProcess(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	return testRun{t, tr}
}

func ptr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }

func one(t *testing.T, evs []fdevent.Event) *fdevent.Event {
	t.Helper()
	if len(evs) != 1 {
		t.Fatalf("got %d events, want 1: %+v", len(evs), evs)
	}
	return &evs[0]
}

// TestIoctlDecode feeds the dma-heap and ION allocation ioctls through
// BPF_PROG_TEST_RUN with the argument structs as the kernel leaves them,
// in this process's memory; a real end-to-end run needs a kernel with
// CONFIG_DMABUF_HEAPS_SYSTEM (/dev/dma_heap/system), which CI lacks.
func TestIoctlDecode(t *testing.T) {
	r := newTestRun(t, trackAll)
	dev, err := os.Open("/dev/null") // stands in for /dev/dma_heap/system: its name is the "heap"
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	devfd := uint64(dev.Fd())
	le := binary.LittleEndian
	buf := make([]byte, 64)
	defer runtime.KeepAlive(buf)

	// struct dma_heap_allocation_data {u64 len; u32 fd; u32 fd_flags; u64 heap_flags;}
	le.PutUint64(buf[0:], 1<<20)
	le.PutUint32(buf[8:], 77)
	le.PutUint32(buf[12:], unix.O_RDWR|unix.O_CLOEXEC)
	le.PutUint64(buf[16:], 0x5)
	e := one(t, r.call(unix.SYS_IOCTL, 0, devfd, DmaHeapIoctlAlloc, ptr(buf)))
	want := fdevent.Event{Type: fdevent.TypeDmabufAlloc, Call: fdevent.CallIoctl, FD: 77, FD2: int32(devfd), Size: 1 << 20,
		Flags: unix.O_RDWR | unix.O_CLOEXEC, Extra: 5, Path: "null"}
	checkDecoded(t, e, want)

	// 4.12+ ION: {u64 len; u32 heap_id_mask; u32 flags; u32 fd; u32 unused;}
	clear(buf)
	le.PutUint64(buf[0:], 8192)
	le.PutUint32(buf[8:], 0x4)
	le.PutUint32(buf[12:], 0x1)
	le.PutUint32(buf[16:], 78)
	e = one(t, r.call(unix.SYS_IOCTL, 0, devfd, IONIocAlloc, ptr(buf)))
	checkDecoded(t, e, fdevent.Event{Type: fdevent.TypeIONAlloc, Call: fdevent.CallIoctl, FD: 78, FD2: int32(devfd), Size: 8192, Aux: 4, Flags: 1, Path: "null"})

	// Legacy ION: {size_t len; size_t align; u32 heap_id_mask; u32 flags; int handle;}
	clear(buf)
	le.PutUint64(buf[0:], 4096)
	le.PutUint64(buf[8:], 65536)
	le.PutUint32(buf[16:], 0x2)
	le.PutUint32(buf[20:], 0x3)
	le.PutUint32(buf[24:], 5)
	e = one(t, r.call(unix.SYS_IOCTL, 0, devfd, IONIocAllocLegacy, ptr(buf)))
	checkDecoded(t, e, fdevent.Event{Type: fdevent.TypeIONLegacyAlloc, Call: fdevent.CallIoctl, FD: 5, FD2: int32(devfd), Size: 4096, Aux: 2, Flags: 3, Extra: 65536, Path: "null"})

	// ION_IOC_FREE: {int handle;}
	clear(buf)
	le.PutUint32(buf[0:], 5)
	e = one(t, r.call(unix.SYS_IOCTL, 0, devfd, IONIocFree, ptr(buf)))
	checkDecoded(t, e, fdevent.Event{Type: fdevent.TypeIONFree, Call: fdevent.CallIoctl, FD: 5, FD2: int32(devfd), Path: "null"})

	// A failed allocation, another ioctl, an unreadable struct, an fd
	// that is not open: nothing, or no device name.
	if evs := r.call(unix.SYS_IOCTL, -int64(unix.ENOTTY), devfd, DmaHeapIoctlAlloc, ptr(buf)); len(evs) != 0 {
		t.Errorf("failed ioctl logged: %+v", evs)
	}
	if evs := r.call(unix.SYS_IOCTL, 0, devfd, unix.TCGETS, ptr(buf)); len(evs) != 0 {
		t.Errorf("TCGETS logged: %+v", evs)
	}
	if evs := r.call(unix.SYS_IOCTL, 0, devfd, DmaHeapIoctlAlloc, 16); len(evs) != 0 {
		t.Errorf("unreadable struct logged: %+v", evs)
	}
	le.PutUint64(buf[0:], 4096)
	le.PutUint32(buf[8:], 79)
	e = one(t, r.call(unix.SYS_IOCTL, 0, 1<<20, DmaHeapIoctlAlloc, ptr(buf)))
	if e.Path != "" || e.FD != 79 {
		t.Errorf("ioctl on a closed fd: %+v", e)
	}
}

func checkDecoded(t *testing.T, got *fdevent.Event, want fdevent.Event) {
	t.Helper()
	if got.TGID != uint32(os.Getpid()) || got.TID != uint32(unix.Gettid()) || got.TS == 0 || got.CommString() == "" {
		t.Errorf("header: %+v", got)
	}
	g := *got
	g.TGID, g.TID, g.TS, g.Comm, g.Stack = 0, 0, 0, [16]byte{}, 0
	if !reflect.DeepEqual(g, want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", g, want)
	}
}

// TestDecodersByTestRun covers the other decoders whose inputs a real
// syscall does not let a test choose: long paths, EINTR closes, pipe
// arrays, the calls that make no descriptor.
func TestDecodersByTestRun(t *testing.T) {
	r := newTestRun(t, config.TrackFD)
	path := []byte("/some/where\x00")
	long := []byte(strings.Repeat("d/", 200) + "\x00")
	exact := []byte(strings.Repeat("e", 255) + "\x00")
	fds := make([]byte, 8)
	binary.LittleEndian.PutUint32(fds[0:], 41)
	binary.LittleEndian.PutUint32(fds[4:], 42)
	how := make([]byte, 24)
	binary.LittleEndian.PutUint64(how, unix.O_CLOEXEC|unix.O_DIRECTORY)
	defer runtime.KeepAlive([][]byte{path, long, exact, fds, how})

	e := one(t, r.call(unix.SYS_OPENAT, 9, uint64(0xffffff9c), ptr(path), unix.O_RDONLY))
	checkDecoded(t, e, fdevent.Event{Type: fdevent.TypeOpen, Call: fdevent.CallOpenat, FD: 9, FD2: -1, Path: "/some/where"})
	e = one(t, r.call(unix.SYS_OPENAT, 9, uint64(0xffffff9c), ptr(long), 0))
	if !e.Truncated || len(e.Path) != 255 || e.Path != string(long[:255]) {
		t.Errorf("long path: trunc=%v len=%d", e.Truncated, len(e.Path))
	}
	e = one(t, r.call(unix.SYS_OPENAT, 9, uint64(0xffffff9c), ptr(exact), 0))
	if e.Truncated || e.Path != string(exact[:255]) {
		t.Errorf("255-byte path: trunc=%v len=%d", e.Truncated, len(e.Path))
	}
	e = one(t, r.call(unix.SYS_OPENAT2, 10, uint64(0xffffff9c), ptr(path), ptr(how), 24))
	checkDecoded(t, e, fdevent.Event{Type: fdevent.TypeOpen, Call: fdevent.CallOpenat2, FD: 10, FD2: -1, Flags: unix.O_CLOEXEC | unix.O_DIRECTORY, Path: "/some/where"})
	e = one(t, r.call(unix.SYS_PIPE2, 0, ptr(fds), unix.O_NONBLOCK))
	checkDecoded(t, e, fdevent.Event{Type: fdevent.TypeOpen, Call: fdevent.CallPipe2, FD: 41, FD2: 42, Flags: unix.O_NONBLOCK})
	e = one(t, r.call(unix.SYS_SOCKETPAIR, 0, unix.AF_UNIX, unix.SOCK_DGRAM, 0, ptr(fds)))
	checkDecoded(t, e, fdevent.Event{Type: fdevent.TypeOpen, Call: fdevent.CallSocketpair, FD: 41, FD2: 42, Aux: unix.AF_UNIX, Flags: unix.SOCK_DGRAM})
	e = one(t, r.call(unix.SYS_DUP3, 12, 3, 12, unix.O_CLOEXEC))
	checkDecoded(t, e, fdevent.Event{Type: fdevent.TypeOpen, Call: fdevent.CallDup3, FD: 12, FD2: 3, Flags: unix.O_CLOEXEC})

	// close releases the number even when it fails with EINTR or EIO;
	// EBADF closed nothing. A close is stamped at its entry.
	r.enter(unix.SYS_CLOSE, 7)
	var mid unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &mid)
	e = one(t, r.exit(-int64(unix.EINTR)))
	checkDecoded(t, e, fdevent.Event{Type: fdevent.TypeClose, Call: fdevent.CallClose, FD: 7, FD2: -1})
	if e.TS >= uint64(mid.Nano()) {
		t.Errorf("close stamped at %d, after its entry (%d)", e.TS, mid.Nano())
	}
	if evs := r.call(unix.SYS_CLOSE, -int64(unix.EBADF), 7); len(evs) != 0 {
		t.Errorf("EBADF close logged: %+v", evs)
	}
	e = one(t, r.call(unix.SYS_CLOSE_RANGE, 0, 3, ^uint64(0)>>32, 0))
	checkDecoded(t, e, fdevent.Event{Type: fdevent.TypeCloseRange, Call: fdevent.CallCloseRange, FD: 3, FD2: -1})

	for _, c := range []struct {
		name string
		nr   uint32
		ret  int64
		a    []uint64
	}{
		{"failed openat", unix.SYS_OPENAT, -int64(unix.ENOENT), []uint64{0, ptr(path), 0}},
		{"signalfd4 on an existing fd", unix.SYS_SIGNALFD4, 5, []uint64{5, 0, 8, 0}},
		{"fcntl F_GETFL", unix.SYS_FCNTL, 2, []uint64{5, unix.F_GETFL}},
		{"close_range CLOEXEC", unix.SYS_CLOSE_RANGE, 0, []uint64{3, 10, unix.CLOSE_RANGE_CLOEXEC}},
		{"pipe2 with an unreadable array", unix.SYS_PIPE2, 0, []uint64{16, 0}},
		{"read (not traced)", unix.SYS_READ, 5, []uint64{3, ptr(path), 1}},
		{"ioctl (not tracked)", unix.SYS_IOCTL, 0, []uint64{3, DmaHeapIoctlAlloc, ptr(fds)}},
	} {
		if evs := r.call(c.nr, c.ret, c.a...); len(evs) != 0 {
			t.Errorf("%s logged: %+v", c.name, evs)
		}
	}
	if sysDup2 != 0 {
		if evs := r.call(sysDup2, 4, 4, 4); len(evs) != 0 {
			t.Errorf("dup2(fd, fd) logged: %+v", evs)
		}
	}
	if n := r.tr.Lost(); n != 0 {
		t.Errorf("lost %d", n)
	}
}

// TestProcessFilter checks that only added processes are recorded, and
// that RemoveProcess stops them.
func TestProcessFilter(t *testing.T) {
	r := newTestRun(t, config.TrackFD)
	if len(r.call(unix.SYS_EVENTFD2, 5, 0, 0)) != 1 {
		t.Fatal("added process not recorded")
	}
	r.tr.RemoveProcess(os.Getpid())
	if evs := r.call(unix.SYS_EVENTFD2, 5, 0, 0); len(evs) != 0 {
		t.Fatalf("removed process recorded: %+v", evs)
	}
}

func buildFdkinds(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs("../tests/fdprogs/fdkinds.c")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "fdkinds")
	if out, err := exec.Command("gcc", "-O1", "-Wall", "-Werror", "-pthread", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}

// TestEveryKindExact runs tests/fdprogs/fdkinds, which opens a descriptor
// of every kind through the raw syscalls and writes what it did, and
// compares its record line by line with the lines logged: each open and
// close once, in order, with kind, thread, pair, dup source, close-on-exec
// and path; close_range expanded; dup2 over an open descriptor closing it;
// failed calls absent. Then the descriptors left open at exit must be the
// Table's.
func TestEveryKindExact(t *testing.T) {
	requireBPF(t)
	bin := buildFdkinds(t)
	dir := t.TempDir()
	truthPath := filepath.Join(dir, "truth")
	tr, err := New(Options{Track: trackAll})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	cmd := exec.Command(bin, dir)
	cmd.Env = append(os.Environ(), "FDTRUTH="+truthPath)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	// Past the loader's opens, which vary with the system.
	if _, err := stdout.Read(make([]byte, 1)); err != nil {
		t.Fatalf("fdkinds did not start: %v\n%s", err, stderr.String())
	}
	if err := tr.AddProcess(pid); err != nil {
		t.Fatal(err)
	}
	stdin.Write([]byte{1})
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("fdkinds: %v\n%s", err, stderr.String())
	}
	evs := drain(t, tr)
	slices.SortStableFunc(evs, func(a, b fdevent.Event) int {
		if a.TS < b.TS {
			return -1
		}
		if a.TS > b.TS {
			return 1
		}
		return 0
	})
	tab := fdevent.NewTable(trackAll)
	var got []string
	var line logfmt.Line
	start := evs[0].TS
	for i := range evs {
		if evs[i].TGID != uint32(pid) {
			t.Fatalf("event of another process: %+v", evs[i])
		}
		tab.Apply(&evs[i], func(o *fdevent.Event) {
			// Through the log line and back: what a reader sees.
			rec := agent.FDRecord(o, start)
			b := logfmt.AppendFD(nil, &rec)
			if err := line.Parse(b[:len(b)-1]); err != nil || line.Kind != logfmt.KindMeta {
				t.Fatalf("%s: %v", b, err)
			}
			r, err := logfmt.ParseFD(line.Word, line.Rest)
			if err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			if r.PID != int64(pid) || r.Name == "" {
				t.Errorf("%s: pid or name wrong", b)
			}
			got = append(got, truthLine(r))
		})
	}
	data, err := os.ReadFile(truthPath)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSpace(string(data)), "\n")
	if want[len(want)-1] != "end tid="+fmt.Sprint(pid) {
		t.Fatalf("fdkinds did not finish: %q", want[len(want)-1])
	}
	want = want[:len(want)-1]
	if !slices.Equal(got, want) {
		t.Errorf("logged lines differ from what fdkinds did")
		for i := 0; i < max(len(got), len(want)); i++ {
			g, w := "", ""
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			mark := "  "
			if g != w {
				mark = "!="
			}
			t.Logf("%s got %-60s want %s", mark, g, w)
		}
	}
	// What is left open, from the record and from the table.
	open := map[string]bool{}
	for _, l := range want {
		f := strings.Fields(l)
		if f[0] == "open" {
			open[f[2]] = true
		} else {
			delete(open, f[2])
		}
	}
	var wantOpen, gotOpen []string
	for fd := range open {
		wantOpen = append(wantOpen, fd)
	}
	for _, o := range tab.Exit(uint32(pid)) {
		gotOpen = append(gotOpen, fmt.Sprint(o.FD))
	}
	slices.Sort(wantOpen)
	slices.Sort(gotOpen)
	if !slices.Equal(gotOpen, wantOpen) {
		t.Errorf("open at exit: table %v, fdkinds %v", gotOpen, wantOpen)
	}
	if len(wantOpen) < 15 {
		t.Errorf("fdkinds leaks only %d descriptors; the test expects most kinds leaked", len(wantOpen))
	}
	if n := tr.Lost(); n != 0 {
		t.Errorf("lost %d records", n)
	}
}

// truthLine writes a parsed line in fdkinds' record format.
func truthLine(r logfmt.FDRecord) string {
	var b strings.Builder
	if r.Word != logfmt.WordFD {
		return r.Word + " " + r.Event
	}
	fmt.Fprintf(&b, "%s %s %d", r.Event, r.Call, r.FD)
	if r.Event == logfmt.FDOpen {
		b.WriteString(" " + r.Kind)
		if r.Peer >= 0 {
			fmt.Fprintf(&b, " peer=%d", r.Peer)
		}
		if r.Old >= 0 {
			fmt.Fprintf(&b, " old=%d", r.Old)
		}
		if r.Cloexec {
			b.WriteString(" cloexec=1")
		}
		if r.Path != "" {
			b.WriteString(" path=" + r.Path)
		}
	}
	fmt.Fprintf(&b, " tid=%d", r.TID)
	return b.String()
}

const trackAll = config.TrackFD | config.TrackDmabuf | config.TrackION
