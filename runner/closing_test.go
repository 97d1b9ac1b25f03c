package runner

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/figures"
	"github.com/memtrace/memtrace/logfmt"
)

// TestClosingLines: the closing lines carry the figures given (here the
// report's, read back as the preload library's text mode does), the
// log's path (quoted for a shell where needed) and the commands; a log
// older than the run gets none; a log on stderr or stdout, -o none and a
// served log get the figures and where the log went.
func TestClosingLines(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "my run.log")
	var b []byte
	b = logfmt.AppendHeader(b, logfmt.Header{Version: "t", PID: 7, Comm: "app", Mode: "bpf"})
	b = logfmt.AppendAlloc(b, 7, "app", "malloc", 1, 1000, 1000, 0x10)
	b = logfmt.AppendAlloc(b, 7, "app", "malloc", 2, 500, 1500, 0x20)
	b = logfmt.AppendFree(b, 7, "app", "free", 3, 500, 0x20)
	b = logfmt.AppendProc(b, logfmt.Proc{Event: logfmt.ProcExit, PID: 7, TS: 4, HasStatus: true, Status: 2})
	b = logfmt.AppendSummary(b, logfmt.Summary{Events: 3, Allocs: 2, Frees: 1})
	before := time.Now().Add(-time.Second)
	if err := os.WriteFile(log, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	ClosingFromLog(&w, FileOutput(log), false, before, nil)
	stats := "memtrace stats:\n\trun: exited with status 2\n\tcalls to allocation functions: 2\n\tpeak heap memory consumption: 1.50K\n" +
		"\ttotal memory leaked: 1000B (1 leaks)\n\tlost events: 0\n"
	want := stats + "memtrace finished: the log is " + log + "; to investigate it run:\n" +
		"  memview '" + log + "'\n  memtrace report '" + log + "'\n"
	if w.String() != want {
		t.Errorf("closing lines:\n%s\nwant:\n%s", w.String(), want)
	}
	if msg := CheckClosing(figures.Figures{Calls: 2, PeakBytes: 1500, Leaks: 1, LeakedBytes: 1000, End: "exited with status 2"}, log); msg != "" {
		t.Errorf("check of the log's own figures: %s", msg)
	}
	if msg := CheckClosing(figures.Figures{Calls: 3, PeakBytes: 1500, Leaks: 1, LeakedBytes: 1000, End: "exited with status 2"}, log); !strings.Contains(msg, "calls: 3 against 2") {
		t.Errorf("check of a wrong call count: %q", msg)
	}
	w.Reset()
	ClosingFromLog(&w, FileOutput(log), false, time.Now().Add(time.Hour), nil)
	ClosingFromLog(&w, FileOutput(filepath.Join(dir, "nope")), false, before, nil)
	if w.Len() != 0 {
		t.Errorf("an older log, a missing one: %q, want nothing", w.String())
	}
	f := figures.Figures{Calls: 2, PeakBytes: 1500, Leaks: 1, LeakedBytes: 1000, End: "exited with status 2", Suppressed: 3, SuppressedBytes: 2048}
	for out, where := range map[string]string{NoLog: "no log was written", "": "the log is on stderr", "-": "the log went to stdout", log: "the log went to the viewer"} {
		w.Reset()
		Closing(&w, ParseOutput(out), out == log, before, &f)
		s := w.String()
		lines := strings.Split(strings.TrimSpace(s), "\n")
		if !strings.HasPrefix(s, strings.TrimSuffix(stats, "\tlost events: 0\n")) || !strings.Contains(s, "\tsuppressed leaks: 2.05K (3 leaks)\n") ||
			!strings.Contains(lines[len(lines)-1], where) {
			t.Errorf("-o %q: %q, want the figures and %q last", out, s, where)
		}
	}
}

// TestClosingCoarseMtime: a log written just after the run began may carry
// a modification time a tick before it (the kernel's coarse clock): it is
// still the run's log, and described.
func TestClosingCoarseMtime(t *testing.T) {
	log := filepath.Join(t.TempDir(), "app.log")
	b := logfmt.AppendHeader(nil, logfmt.Header{Version: "t", PID: 7, Comm: "app", Mode: "preload"})
	b = logfmt.AppendAlloc(b, 7, "app", "malloc", 1, 1000, 1000, 0x10)
	b = logfmt.AppendSummary(b, logfmt.Summary{Events: 1, Allocs: 1})
	if err := os.WriteFile(log, b, 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(log)
	if err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	ClosingFromLog(&w, FileOutput(log), false, st.ModTime().Add(4*time.Millisecond), nil)
	if !strings.Contains(w.String(), "calls to allocation functions: 1\n") {
		t.Errorf("a log written a tick after the run began: %q, want its closing lines", w.String())
	}
}
