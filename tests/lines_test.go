package tests

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/logfmt"
)

// metaLines returns a log's [memtrace] lines in order, failing on a line
// that is not exactly what logfmt's typed writer makes of what its typed
// parser reads (the writers own every line).
func metaLines(t *testing.T, log []byte) (metas []any, allocs, frees uint64) {
	t.Helper()
	sc := logfmt.NewScanner(bytes.NewReader(log))
	var l logfmt.Line
	for sc.Scan() {
		if err := l.Parse(sc.Line()); err != nil {
			t.Fatalf("%q: %v", sc.Line(), err)
		}
		switch l.Kind {
		case logfmt.KindAlloc:
			allocs++
			continue
		case logfmt.KindFree:
			frees++
			continue
		case logfmt.KindMeta:
		default:
			continue
		}
		var v any
		var again []byte
		var err error
		switch string(l.Word) {
		case logfmt.WordHeader:
			var x logfmt.Header
			x, err = logfmt.ParseHeader(l.Rest)
			v, again = x, logfmt.AppendHeader(nil, x)
		case logfmt.WordProc:
			var x logfmt.Proc
			x, err = logfmt.ParseProc(l.Rest)
			v, again = x, logfmt.AppendProc(nil, x)
		case logfmt.WordSummary:
			var x logfmt.Summary
			x, err = logfmt.ParseSummary(l.Rest)
			v, again = x, logfmt.AppendSummary(nil, x)
		case logfmt.WordThread:
			var x logfmt.Thread
			x, err = logfmt.ParseThread(l.Rest)
			v, again = x, logfmt.AppendThread(nil, x)
		case logfmt.WordLost:
			var x logfmt.Lost
			x, err = logfmt.ParseLost(l.Rest)
			v, again = x, logfmt.AppendLost(nil, x)
		default:
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", sc.Line(), err)
		}
		if string(again) != string(sc.Line())+"\n" {
			t.Errorf("line not in logfmt's layout\nlog:    %q\nlogfmt: %q", sc.Line(), again)
		}
		metas = append(metas, v)
	}
	return metas, allocs, frees
}

const linesProg = `#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
	int forever = argc > 1;
	for (int i = 0; forever || i < 200; i++) {
		void *p = malloc(100 + i % 7);
		free(p);
		if (forever)
			usleep(2000);
	}
	return 0;
}
`

// The eBPF path's header and summary: logfmt's layout, start= this run's
// wall-clock time in UTC, the summary's counts those of the log's lines.
func TestCLIHeaderAndSummaryLines(t *testing.T) {
	requireBPF(t)
	bin := buildC(t, "lines", linesProg, "-fno-builtin")
	log := filepath.Join(t.TempDir(), "log")
	before := time.Now()
	code, _, se := memtraceRun(t, nil, "-o", log, "--", bin)
	took := time.Since(before)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	metas, allocs, frees := metaLines(t, bpfLog(t, log))
	h, ok := metas[0].(logfmt.Header)
	if !ok {
		t.Fatalf("first [memtrace] line is %#v, want the header", metas[0])
	}
	if h.Mode != logfmt.ModeBPF || h.PID <= 0 || len(h.PIDs) != 1 || h.PIDs[0] != h.PID || h.Comm != "lines" || h.Cmd != bin || h.Version == "" {
		t.Errorf("header: %+v", h)
	}
	switch h.Probes {
	case "uprobe_session", "uprobe_multi", "uprobe":
	default:
		t.Errorf("probes=%q", h.Probes)
	}
	if h.Start.Location() != time.UTC || h.Start.Before(before) || h.Start.After(before.Add(took)) {
		t.Errorf("start=%v, want in [%v, %v] in UTC", h.Start, before, before.Add(took))
	}
	s, ok := metas[len(metas)-1].(logfmt.Summary)
	if !ok {
		t.Fatalf("last [memtrace] line is %#v, want the summary", metas[len(metas)-1])
	}
	// malloc+free 200 times, and whatever the C library allocates for
	// itself at start-up.
	if s.Allocs != allocs || s.Frees != frees || allocs < 200 || frees < 200 || s.Lost != 0 || s.Events < allocs+frees {
		t.Errorf("summary %+v, log has %d allocs and %d frees", s, allocs, frees)
	}
	if s.DurationUS <= 0 || s.DurationUS > took.Microseconds() {
		t.Errorf("duration_us=%d, memtrace ran %v", s.DurationUS, took)
	}
}

// -p with two processes: the header lists both (pids=), each gets an
// attach line with its name and command line and no ts=, and Ctrl-C ends
// the log with the summary; both processes run on.
func TestCLIAttachLines(t *testing.T) {
	requireBPF(t)
	bin := buildC(t, "attachme", linesProg, "-fno-builtin")
	var pids []int
	for range 2 {
		p := command(bin, "forever")
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Process.Kill(); p.Wait() })
		pids = append(pids, p.Process.Pid)
	}
	log := filepath.Join(t.TempDir(), "log")
	mtOut := new(lockedBuffer)
	mt := command(need(t, "bin/memtrace"), "-o", log, "-p", itoa(pids[0])+","+itoa(pids[1]))
	mt.Stdout, mt.Stderr = mtOut, mtOut
	if err := mt.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mt.Process.Kill() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := waitHeader(ctx, log); err != nil {
		t.Fatalf("%v\nmemtrace: %s", err, mtOut.String())
	}
	time.Sleep(100 * time.Millisecond) // some events
	mt.Process.Signal(syscall.SIGINT)
	if err := runWait(mt, 30*time.Second); err != nil {
		t.Fatalf("memtrace after SIGINT: %v\n%s", err, mtOut.String())
	}
	metas, _, _ := metaLines(t, bpfLog(t, log))
	h := metas[0].(logfmt.Header)
	if h.PID != int64(pids[0]) || len(h.PIDs) != 2 || h.PIDs[0] != int64(pids[0]) || h.PIDs[1] != int64(pids[1]) || h.Comm != "attachme" {
		t.Errorf("header %+v, want pid %d and pids %v", h, pids[0], pids)
	}
	attached := map[int64]logfmt.Proc{}
	for _, m := range metas {
		if p, ok := m.(logfmt.Proc); ok && p.Event == logfmt.ProcAttach {
			attached[p.PID] = p
		}
	}
	for _, pid := range pids {
		p, ok := attached[int64(pid)]
		if want := bin + " forever"; !ok || p.Comm != "attachme" || p.Cmd != want || p.TS != 0 {
			t.Errorf("attach line of %d: %+v (found %v), want comm=attachme cmd=%q", pid, p, ok, want)
		}
	}
	if _, ok := metas[len(metas)-1].(logfmt.Summary); !ok {
		t.Errorf("the log does not end with the summary: %#v", metas[len(metas)-1])
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("process %d did not run on: %v", pid, err)
		}
		if st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err != nil || bytes.Contains(st, []byte(") T ")) {
			t.Errorf("process %d is stopped or gone: %q", pid, st)
		}
	}
}
