package runner

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/report"
)

// TestClosingLines: the closing lines carry the report's figures of the
// log, its path (quoted for a shell where needed) and the commands; a log
// older than the run, -o none and a served log get none; stderr gets one
// sentence.
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
	Closing(&w, log, false, before, 0)
	want := "memtrace stats:\n\trun: exited with status 2\n\tcalls to allocation functions: 2\n\tpeak heap memory consumption: 1.50K\n" +
		"\ttotal memory leaked: 1000B (1 leaks)\n\tlost events: 0\nmemtrace finished: the log is " + log + "; to investigate it run:\n" +
		"  memview '" + log + "'\n  memtrace report '" + log + "'\n"
	if w.String() != want {
		t.Errorf("closing lines:\n%s\nwant:\n%s", w.String(), want)
	}
	f, err := report.LogFigures(log, &w)
	if err != nil || f.Calls != 2 || f.PeakBytes != 1500 || f.LeakedBytes != 1000 || f.Leaks != 1 || f.StillAllocated {
		t.Errorf("LogFigures %+v %v", f, err)
	}
	for name, call := range map[string]func(*bytes.Buffer){
		"older log": func(w *bytes.Buffer) { Closing(w, log, false, time.Now().Add(time.Hour), 0) },
		"none":      func(w *bytes.Buffer) { Closing(w, NoLog, false, before, 0) },
		"served":    func(w *bytes.Buffer) { Closing(w, log, true, before, 0) },
		"missing":   func(w *bytes.Buffer) { Closing(w, filepath.Join(dir, "nope"), false, before, 0) },
	} {
		var w bytes.Buffer
		call(&w)
		if w.Len() != 0 {
			t.Errorf("%s: %q, want nothing", name, w.String())
		}
	}
	// A compressed log whose text is over the bound: not read back,
	// though its file is small; the path and commands only.
	w.Reset()
	Closing(&w, log, false, before, closingMaxLog+1)
	if s := w.String(); strings.Contains(s, "calls to allocation functions") || !strings.Contains(s, "memview '"+log+"'") {
		t.Errorf("log of %d bytes of text: %q, want the path and commands without figures", closingMaxLog+1, s)
	}
	w.Reset()
	Closing(&w, "", false, before, 0)
	if s := w.String(); strings.Count(s, "\n") != 1 || !strings.Contains(s, "the log is on stderr") {
		t.Errorf("stderr log: %q", s)
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
	Closing(&w, log, false, st.ModTime().Add(4*time.Millisecond), 0)
	if !strings.Contains(w.String(), "calls to allocation functions: 1\n") {
		t.Errorf("a log written a tick after the run began: %q, want its closing lines", w.String())
	}
}
