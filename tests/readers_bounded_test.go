package tests

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/logfmt"
)

// writeManyFramesLog writes a memtrace log of allocs allocations whose
// stacks of depth frames are all distinct: allocs*depth distinct frames,
// a tenth of the blocks leaked.
func writeManyFramesLog(t *testing.T, path string, allocs, depth int) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	b := logfmt.AppendHeader(nil, logfmt.Header{Version: "t", PID: 7, Comm: "app", Cmd: "./app", Mode: "bpf"})
	fr := 0
	for i := 0; i < allocs; i++ {
		ptr := uint64(0x10000 + i*64)
		b = logfmt.AppendAlloc(b, 7, "app", "malloc", uint64(2*i), 64, 0, ptr)
		for k := 0; k < depth; k++ {
			b = logfmt.AppendFrame(b, k, "/usr/lib/libapp.so", "_ZN3app"+strconv.Itoa(fr)+"fEv", uint64(fr%4096), 0x7f0000000000+uint64(fr)*16)
			fr++
		}
		if i%10 != 0 {
			b = logfmt.AppendFree(b, 7, "app", "free", uint64(2*i+1), 64, ptr)
		}
		if len(b) > 1<<20 {
			w.Write(b)
			b = b[:0]
		}
	}
	b = logfmt.AppendProc(b, logfmt.Proc{Event: logfmt.ProcExit, PID: 7, TS: uint64(2 * allocs), HasStatus: true})
	b = logfmt.AppendSummary(b, logfmt.Summary{Allocs: uint64(allocs)})
	w.Write(b)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	f.Close()
	return st.Size()
}

// peakRSS runs a command and returns its peak resident size in MB,
// through the maxRSS helper: a child of the test binary itself would
// count the test's own resident pages (compress_test.go's maxRSS says
// why), and other tests of the package leave it hundreds of MB.
func peakRSS(t *testing.T, name string, args ...string) (int64, string) {
	t.Helper()
	cmd := command(buildC(t, "maxrss", maxRSS), append([]string{name}, args...)...)
	var out, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &se
	if err := runCmd(t, cmd, 5*time.Minute); err != nil {
		t.Fatalf("%s %v: %v\n%s%s", name, args, err, out.String(), se.String())
	}
	text := se.String()
	i := strings.LastIndex(text, "maxrss_kb=")
	if i < 0 {
		t.Fatalf("%s %v: no maxrss line: %s", name, args, text)
	}
	kb, err := strconv.ParseInt(strings.TrimSpace(text[i+len("maxrss_kb="):]), 10, 64)
	if err != nil {
		t.Fatalf("%s %v: stderr %q", name, args, text)
	}
	return kb >> 10, out.String() + text[:i]
}

// TestManyDistinctFramesBoundedMemory: a log of a million distinct frames
// (over 100 MB) is read by the report in at most 400 MB, by memview's
// loader and its thread table in less; and the report is right.
func TestManyDistinctFramesBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads a 118 MB log")
	}
	path := filepath.Join(t.TempDir(), "frames.log")
	size := writeManyFramesLog(t, path, 200_000, 5)
	t.Logf("%d MB, 1000000 distinct frames", size>>20)
	memtrace, memview := need(t, "bin/memtrace"), need(t, "bin/memview")
	for _, c := range []struct {
		name  string
		limit int64
		bin   string
		args  []string
		want  string
	}{
		{"memtrace report", 400, memtrace, []string{"report", path}, "total memory leaked: 1.28M (20000 leaks)"},
		{"memview (loading, as the viewer does)", 300, memview, []string{"--load-stats", path}, "leaks 20000 (1280000 bytes)"},
		{"memview --dump-threads", 350, memview, []string{"--dump-threads", path}, " 20000        1280000"},
	} {
		mb, out := peakRSS(t, c.bin, c.args...)
		t.Logf("%s: %d MB", c.name, mb)
		if mb > c.limit {
			t.Errorf("%s took %d MB, want at most %d", c.name, mb, c.limit)
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("%s lacks %q:\n%.2000s", c.name, c.want, out)
		}
	}
}

// writeManyStacksLog writes a memtrace log of allocs allocations, each
// with a call stack of its own made of three of 300 frames (a large
// program's many call paths over far fewer functions), a tenth of the
// blocks leaked.
func writeManyStacksLog(t *testing.T, path string, allocs int) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	b := logfmt.AppendHeader(nil, logfmt.Header{Version: "t", PID: 7, Comm: "app", Cmd: "./app", Mode: "bpf"})
	for i := 0; i < allocs; i++ {
		ptr := uint64(0x10000 + i*64)
		b = logfmt.AppendAlloc(b, 7, "app", "malloc", uint64(2*i), 64, 0, ptr)
		for k, fr := range []int{i % 100, 100 + i/100%100, 200 + i/10000%100} {
			name := "f" + strconv.Itoa(fr)
			b = logfmt.AppendFrame(b, k, "/usr/lib/libapp.so", "_ZN3app"+strconv.Itoa(len(name))+name+"Ev", uint64(fr), 0x7f0000000000+uint64(fr)*16)
		}
		if i%10 != 0 {
			b = logfmt.AppendFree(b, 7, "app", "free", uint64(2*i+1), 64, ptr)
		}
		if len(b) > 1<<20 {
			w.Write(b)
			b = b[:0]
		}
	}
	b = logfmt.AppendProc(b, logfmt.Proc{Event: logfmt.ProcExit, PID: 7, TS: uint64(2 * allocs), HasStatus: true})
	b = logfmt.AppendSummary(b, logfmt.Summary{Allocs: uint64(allocs)})
	w.Write(b)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	f.Close()
	return st.Size()
}

// TestManyDistinctStacksBoundedMemory: a log of 400,000 distinct call
// stacks over 300 frames is read by the report and by memview in memory
// bounded by what the log holds: the stacks' frame ids, not a key and a
// map entry per stack, nor a site's key text per stack (issue 31).
func TestManyDistinctStacksBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads a 163 MB log")
	}
	path := filepath.Join(t.TempDir(), "stacks.log")
	size := writeManyStacksLog(t, path, 400_000)
	t.Logf("%d MB, 400000 distinct stacks", size>>20)
	memtrace, memview := need(t, "bin/memtrace"), need(t, "bin/memview")
	for _, c := range []struct {
		name  string
		limit int64
		bin   string
		args  []string
		want  string
	}{
		// A site key's text and a map entry per stack took the report
		// well past this bound.
		{"memtrace report", 250, memtrace, []string{"report", path}, "total memory leaked: 2.56M (40000 leaks)"},
		// memview's model with a map entry per stack is too close to
		// tell apart here (TestHeapPerDistinctStack in analysis does):
		// a bound against what would grow by far.
		{"memview (loading, as the viewer does)", 120, memview, []string{"--load-stats", path}, "leaks 40000 (2560000 bytes)  stacks 400001"},
		{"memview --dump-threads", 100, memview, []string{"--dump-threads", path}, " 40000        2560000"},
	} {
		mb, out := peakRSS(t, c.bin, c.args...)
		t.Logf("%s: %d MB", c.name, mb)
		if mb > c.limit {
			t.Errorf("%s took %d MB, want at most %d", c.name, mb, c.limit)
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("%s lacks %q:\n%.2000s", c.name, c.want, out)
		}
	}
}
