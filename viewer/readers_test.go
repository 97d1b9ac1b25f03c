package viewer

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/logfmt"
)

// lostLog: three blocks whose frees were lost and whose addresses were
// handed out again (unknown), one block never seen again (a leak that may
// be a lost free).
func lostLog() []byte {
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "5"}, logfmt.KV{Key: "mode", Value: "bpf"})
	ts := uint64(10)
	for k := 0; k < 3; k++ {
		ptr := uint64(0x1000 + k*0x40)
		b = logfmt.AppendAlloc(b, 6, "hammer", "malloc", ts, 32, 32, ptr)
		b = logfmt.AppendAlloc(b, 6, "hammer", "malloc", ts+1, 32, 64, ptr)
		b = logfmt.AppendFree(b, 6, "hammer", "free", ts+2, 32, ptr)
		ts += 3
	}
	b = logfmt.AppendAlloc(b, 5, "main", "malloc", ts, 500, 500, 0x9000)
	b = logfmt.AppendMeta(b, logfmt.WordLost, logfmt.KV{Key: "count", Value: "3"}, logfmt.KV{Key: "total", Value: "3"})
	b = logfmt.AppendSummary(b, logfmt.Summary{Lost: 3})
	return b
}

func TestHeaderLostRecords(t *testing.T) {
	h := newHarness(t, lostLog(), Options{})
	hd := h.a.HeaderInfo()
	if hd.Leaks != 1 || hd.LeakBytes != 500 || hd.Unknown != 3 || hd.UnknownBytes != 96 || !hd.LeaksOverstated || hd.Lost != 3 {
		t.Fatalf("header %+v", hd)
	}
	h.contains("Leaks: ≤1  (500B)")
	h.contains("Unknown: 3  (96B) records lost")
	h.contains("[?] 0x1000")
	// The thread table counts leaks without the unknown blocks.
	if !strings.Contains(h.screen(), "hammer") || strings.Contains(h.screen(), "3 (96B)") {
		t.Fatalf("thread table:\n%s", h.screen())
	}
	// f: All → Leaks → Active → Freed → Unknown → All.
	h.keys("f")
	h.contains("Filter: Leaks")
	h.contains("1 shown")
	h.keys("fff")
	h.contains("Filter: Unknown")
	h.contains("3 shown")
	h.lacks("[L]")
	h.contains("UNKNOWN (RECORDS LOST)")
	h.contains("allocated again: free lost")
	h.keys("f")
	h.contains("Filter: All")
}

// A log without lost records has no Unknown filter and no ≤.
func TestHeaderNoLostRecords(t *testing.T) {
	log := lostLog()
	log = log[:strings.Index(string(log), "[memtrace] lost")]
	log = logfmt.AppendProc(log, logfmt.Proc{Event: logfmt.ProcExit, PID: 5, TS: 100, HasStatus: true})
	log = logfmt.AppendSummary(log, logfmt.Summary{})
	h := newHarness(t, log, Options{})
	hd := h.a.HeaderInfo()
	if hd.Leaks != 4 || hd.Unknown != 0 || hd.LeaksOverstated {
		t.Fatalf("header %+v", hd)
	}
	h.contains("Leaks: 4  (596B)")
	h.lacks("Unknown")
	h.keys("ffff")
	h.contains("Filter: All")
}

func summaryLog(summary bool) []byte {
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "5"}, logfmt.KV{Key: "mode", Value: "bpf"})
	b = logfmt.AppendAlloc(b, 5, "main", "malloc", 1, 64, 64, 0x100)
	b = logfmt.AppendAlloc(b, 5, "main", "malloc", 2, 64, 128, 0x200)
	if summary {
		// The exit line too: a summary without it is an interrupted
		// run, whose blocks are still allocated, not leaks.
		b = logfmt.AppendProc(b, logfmt.Proc{Event: logfmt.ProcExit, PID: 5, TS: 3, HasStatus: true})
		b = logfmt.AppendMeta(b, logfmt.WordSummary, logfmt.KV{Key: "events", Value: "2"}, logfmt.KV{Key: "lost", Value: "0"})
	}
	return b
}

// memview -f LOG: ● LIVE while the file may grow, ✕ DONE once the
// tracer's summary line is in it, as main runs the loader.
func TestFollowedFileDoneAtSummary(t *testing.T) {
	for round := 0; round < 5; round++ {
		path := filepath.Join(t.TempDir(), "live.log")
		if err := os.WriteFile(path, summaryLog(false), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		m := analysis.New()
		sim := tcell.NewSimulationScreen("UTF-8")
		if err := sim.Init(); err != nil {
			t.Fatal(err)
		}
		sim.SetSize(130, 40)
		a := New(sim, m, Options{Source: path, Live: true})
		stop := make(chan struct{})
		ended := make(chan struct{})
		go func() {
			err := m.Stream(&analysis.Follower{R: f, Poll: 10 * time.Millisecond}, analysis.StreamOptions{Lock: &a.Mu, Stop: stop})
			a.Mu.Lock()
			select {
			case <-stop:
			default:
				a.SetEnded(err)
			}
			a.Mu.Unlock()
			close(ended)
		}()
		waitFor(t, a, func() bool { return m.Len() == 2 })
		h := &harness{t: t, sim: sim, a: a, m: m}
		a.Draw()
		if s := a.HeaderInfo().State; s != StateLive {
			t.Fatalf("round %d: %v before the summary", round, s)
		}
		h.contains("● LIVE")
		w, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		full := summaryLog(true)
		w.Write(full[len(summaryLog(false)):])
		w.Close()
		select {
		case <-ended:
		case <-time.After(5 * time.Second):
			close(stop)
			t.Fatalf("round %d: the loader kept following after the summary line", round)
		}
		a.Draw()
		if s := a.HeaderInfo().State; s != StateDone {
			t.Fatalf("round %d: %v after the summary", round, s)
		}
		h.contains("✕ DONE")
		h.contains("Leaks: 2  (128B)")
		sim.Fini()
		f.Close()
	}
}

// The summary line alone is enough for the header, before the loader
// has returned (a stream whose sender has not closed it yet).
func TestHeaderDoneWhenSummaryRead(t *testing.T) {
	m := analysis.New()
	a := New(nil, m, Options{Live: true})
	if a.header().State != StateLive {
		t.Fatal("not live")
	}
	m.Ended = true
	if a.header().State != StateDone {
		t.Fatal("summary read, header not done")
	}
	// A file being loaded is LOADING until it is read, then DONE.
	b := New(nil, analysis.New(), Options{})
	if b.header().State != StateLoading {
		t.Fatal("not loading")
	}
	b.M.Finish()
	if b.header().State != StateDone {
		t.Fatal("loaded file not done")
	}
}

func TestHeaderTruncatedStacks(t *testing.T) {
	var b []byte
	stack := func(reason string) {
		b = logfmt.AppendMeta(b, logfmt.WordStack, logfmt.KV{Key: "truncated", Value: "1"}, logfmt.KV{Key: "reason", Value: reason})
	}
	b = logfmt.AppendAlloc(b, 1, "m", "malloc", 1, 8, 8, 0x10)
	b = logfmt.AppendFrame(b, 0, "./demo", "cut_here", 1, 0x401)
	stack("fp")
	b = logfmt.AppendAlloc(b, 1, "m", "malloc", 2, 8, 16, 0x20)
	b = logfmt.AppendFrame(b, 0, "./demo", "cut_here", 1, 0x401)
	stack("fp")
	b = logfmt.AppendAlloc(b, 1, "m", "malloc", 3, 8, 24, 0x30)
	b = logfmt.AppendFrame(b, 0, "./demo", "too_deep", 2, 0x402)
	b = logfmt.AppendFrame(b, 1, "./demo", "caller", 3, 0x403)
	stack("depth")
	b = logfmt.AppendAlloc(b, 1, "m", "malloc", 4, 8, 32, 0x40)
	b = logfmt.AppendFrame(b, 0, "./demo", "whole", 4, 0x404)
	b = logfmt.AppendFrame(b, 1, "./demo", "main", 5, 0x405)
	h := newHarness(t, b, Options{})
	hd := h.a.HeaderInfo()
	want := []analysis.Truncation{{Reason: "fp", Stacks: 1, Events: 2}, {Reason: "depth", Stacks: 1, Events: 1}}
	if !slices.Equal(hd.Truncated, want) || hd.TruncStacks != 2 || hd.TruncEvents != 3 {
		t.Fatalf("header %+v", hd)
	}
	h.contains("Truncated: 2 stacks/3 events (fp 1/2, depth 1/1)")
	// Group mode marks the cut call sites, not the whole one.
	h.keys("\\")
	var cut, whole string
	for _, r := range h.rows() {
		switch {
		case strings.Contains(r, "cut_here") && strings.Contains(r, "×"):
			cut = r
		case strings.Contains(r, "whole") && strings.Contains(r, "×"):
			whole = r
		}
	}
	if !strings.Contains(cut, "cut_here …[truncated: fp]") || whole == "" || strings.Contains(whole, "truncated") {
		t.Fatalf("group rows:\n%s\n%s\n%s", cut, whole, h.screen())
	}
	h.contains("… truncated: ")
}

func TestHeaderSkippedFramesAndHint(t *testing.T) {
	var b []byte
	b = logfmt.AppendAlloc(b, 1, "m", "malloc", 1, 8, 8, 0x10)
	for i := 0; i < 500; i++ {
		b = logfmt.AppendFrame(b, i, "./deep", fmt.Sprintf("f%d", i), uint64(i), uint64(0x1000+i))
	}
	h := newHarness(t, b, Options{})
	if hd := h.a.HeaderInfo(); hd.SkippedFrames != 500-logfmt.MaxFrames || hd.Hint != "" {
		t.Fatalf("header %+v", hd)
	}
	h.contains(fmt.Sprintf("Skipped: %d frames", 500-logfmt.MaxFrames))
	h.contains("── Stack, truncated: max-frames ──")

	// A live source that has shown nothing parseable says so.
	g := newHarness(t, []byte("GET / HTTP/1.1\nHost: x\n\x00\x01\x02\n"), Options{Source: "stdin", Live: true})
	hint := g.a.HeaderInfo().Hint
	if want := analysis.EmptyLogHint("stdin", 3, 0); hint != want {
		t.Fatalf("hint %q, want %q", hint, want)
	}
	g.contains("3 lines, no log line (is it a memtrace or memtrack log?)")
	// The list pane has the report's words, wrapped.
	g.contains("no allocation in stdin: 3 lines read, none of them an")
}

// Sizes at the bound: the header, the thread table and the timeline show
// saturated figures, never negative or wrapped ones.
func TestViewerSaturatedFigures(t *testing.T) {
	var b []byte
	for i := 0; i < 200; i++ {
		b = logfmt.AppendAlloc(b, 1, "big", "mmap", uint64(i), logfmt.MaxSize, 0, uint64(i+1)<<40)
	}
	b = logfmt.AppendAlloc(b, 1, "big", "mmap", logfmt.MaxTS, 8, 0, 0x10)
	b = logfmt.AppendAlloc(b, 1, "big", "malloc", 1<<64-1, 1<<64-1, 0, 0x20)
	h := newHarness(t, b, Options{})
	hd := h.a.HeaderInfo()
	if hd.Leaks != 201 || hd.LeakBytes != analysis.MaxBytes || hd.Skipped != 1 {
		t.Fatalf("header %+v", hd)
	}
	h.contains("Leaks: 201  (9.22E)")
	h.contains("Skipped: 1 bad lines")
	h.lacks("-")
	h.keys("H") // histogram of sizes near 2^56
	h.contains("9.22E")
}

// A process the tracer could not probe is counted in the header.
func TestHeaderUntraced(t *testing.T) {
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "5"}, logfmt.KV{Key: "mode", Value: "bpf"})
	b = logfmt.AppendAlloc(b, 5, "main", "malloc", 10, 64, 64, 0x1000)
	h := newHarness(t, b, Options{})
	if hd := h.a.HeaderInfo(); hd.Untraced != "" {
		t.Fatalf("untraced %q in a fully traced log", hd.Untraced)
	}
	h.lacks("Untraced:")
	b = logfmt.AppendMeta(b, logfmt.WordProc, logfmt.KV{Key: "event", Value: "untraced"}, logfmt.KV{Key: "pid", Value: "7"},
		logfmt.KV{Key: "reason", Value: "too many open files"})
	h = newHarness(t, b, Options{})
	if hd := h.a.HeaderInfo(); hd.Untraced != "Untraced: 1" {
		t.Fatalf("header untraced %q, want Untraced: 1", hd.Untraced)
	}
	h.contains("Untraced: 1")
}
