package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/internal/units"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/report"
	"github.com/memtrace/memtrace/symbols"
	"github.com/memtrace/memtrace/viewer"
)

// readerSays is what one reader prints of a log's leaks.
type readerSays struct {
	reader string
	leaks  int64
	bytes  string // as people read them (units.Bytes): the text report has no other
	caveat bool   // it says the figures miss lost records
}

var (
	textLeaks = regexp.MustCompile(`(?m)^(?:total memory leaked|still allocated at detach|live at the cut): (\S+) \((\d+) (?:leaks|blocks)`)
	dumpTotal = regexp.MustCompile(`(?m)^TOTAL\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$`)
)

// everyReader reads the log at path through every reader: the text
// report, its JSON, memview --dump-threads, the closing lines' figures
// (report.LogFigures) and memview's header.
func everyReader(t *testing.T, path string) []readerSays {
	t.Helper()
	var out []readerSays

	var text, errs bytes.Buffer
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	if code := report.Main([]string{"--resolve", "0", "--json", jsonPath, path}, &text, &errs); code != 0 {
		t.Fatalf("report: exit %d: %s", code, errs.String())
	}
	mt := textLeaks.FindStringSubmatch(text.String())
	if mt == nil {
		t.Fatalf("the report has no leak figure:\n%s", text.String())
	}
	n, _ := strconv.ParseInt(mt[2], 10, 64)
	out = append(out, readerSays{"report text", n, mt[1], strings.Contains(text.String(), "every figure above misses them")})

	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Leaks       int64 `json:"leaks"`
		LeakedBytes int64 `json:"leaked_bytes"`
		Summary     struct {
			LostEvents int64 `json:"lost_events"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatal(err)
	}
	out = append(out, readerSays{"report JSON", j.Leaks, units.Bytes(uint64(j.LeakedBytes)), j.Summary.LostEvents > 0})

	dump, err := command(need(t, "bin/memview"), "--dump-threads", path).Output()
	if err != nil {
		t.Fatalf("memview --dump-threads: %v", err)
	}
	md := dumpTotal.FindStringSubmatch(string(dump))
	if md == nil {
		t.Fatalf("no TOTAL row:\n%s", dump)
	}
	n, _ = strconv.ParseInt(md[6], 10, 64)
	b, _ := strconv.ParseUint(md[7], 10, 64)
	out = append(out, readerSays{"memview --dump-threads", n, units.Bytes(b), strings.Contains(string(dump), "LOST by the tracer (every figure above misses them)")})

	f, err := report.LogFigures(path, &errs)
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, readerSays{"closing lines (report.LogFigures)", f.Leaks, units.Bytes(f.LeakedBytes), f.Caveat != ""})

	h := memviewHeader(t, path)
	out = append(out, readerSays{"memview header", h.Leaks, units.Bytes(h.LeakBytes), h.Lost > 0 && h.LeaksOverstated == (h.Leaks > 0)})
	return out
}

// agree fails unless every reader gives the same leaks and caveats lost
// records when the log has them (lost).
func agree(t *testing.T, says []readerSays, lost bool) {
	t.Helper()
	for _, s := range says {
		if s.leaks != says[0].leaks || s.bytes != says[0].bytes {
			t.Errorf("%s says %d leaks (%s), %s says %d (%s)", s.reader, s.leaks, s.bytes, says[0].reader, says[0].leaks, says[0].bytes)
		}
		if s.caveat != lost {
			t.Errorf("%s: caveat for lost records %v, want %v", s.reader, s.caveat, lost)
		}
	}
}

// lostRecordsLog is a memtrace log of a run with lost records: its
// program's own leak, blocks that a later allocation overlapped (their
// frees were lost: unknown, not leaks, which only the whole model tells),
// glibc's start-up block (suppressed), and no exit line: the exit may be
// among the lost records, so the run's end is not known, and its blocks
// are not "still allocated at detach".
func lostRecordsLog() []byte {
	var b []byte
	b = logfmt.AppendHeader(b, logfmt.Header{Version: "t", PID: 50, Comm: "app", Cmd: "./app", Mode: "bpf"})
	b = logfmt.AppendThread(b, logfmt.Thread{TID: 50, PID: 50, Name: "app"})
	b = logfmt.AppendAlloc(b, 50, "app", "malloc", 1, 72704, 72704, 0x7000)
	b = logfmt.AppendFrame(b, 0, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30", "", 0xa57ba, 0x7f00a57ba)
	b = logfmt.AppendFrame(b, 1, "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "_dl_init", 0x12, 0x7f1000012)
	ts := uint64(10)
	// 0x1000..0x1400: four 256-byte blocks whose frees were lost, then a
	// 1 KiB block over all of them (coalesced and split again).
	for k := uint64(0); k < 4; k++ {
		b = logfmt.AppendAlloc(b, 50, "app", "malloc", ts, 256, 0, 0x1000+k*256)
		b = logfmt.AppendFrame(b, 0, "./app", "small", 0x10, 0x401010)
		ts++
	}
	b = logfmt.AppendAlloc(b, 50, "app", "malloc", ts, 1024, 0, 0x1000)
	b = logfmt.AppendFrame(b, 0, "./app", "big", 0x10, 0x402010)
	b = logfmt.AppendFree(b, 50, "app", "free", ts+1, 1024, 0x1000)
	// The program's own leaks.
	for k := uint64(0); k < 3; k++ {
		b = logfmt.AppendAlloc(b, 50, "app", "malloc", ts+2+k, 100, 0, 0x9000+k*0x100)
		b = logfmt.AppendFrame(b, 0, "./app", "leak_here", 0x10, 0x403010)
	}
	b = logfmt.AppendLost(b, logfmt.Lost{Count: 40, Total: 40, TS: ts + 10})
	b = logfmt.AppendSummary(b, logfmt.Summary{Events: 11, Allocs: 9, Frees: 1, Lost: 40, DurationUS: 100})
	return b
}

// TestReadersAgreeWithLostRecords: one log with lost records through
// every reader: the same leaks everywhere (memview --dump-threads counted
// the blocks whose frees were lost and the suppressed ones as leaks), each
// caveating its figures, and a run whose exit line is missing is not said
// to be interrupted.
func TestReadersAgreeWithLostRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lost.log")
	if err := os.WriteFile(path, lostRecordsLog(), 0o644); err != nil {
		t.Fatal(err)
	}
	says := everyReader(t, path)
	agree(t, says, true)
	if says[0].leaks != 3 {
		t.Errorf("%d leaks, want the program's 3", says[0].leaks)
	}
	var text, errs bytes.Buffer
	report.Main([]string{"--resolve", "0", path}, &text, &errs)
	if s := text.String(); strings.Contains(s, "interrupted") || strings.Contains(s, "still allocated at detach") ||
		!strings.Contains(s, "run: not known (no exit line, and the tracer lost records") {
		t.Errorf("a run without its exit line and with lost records:\n%s", s)
	}
	f, _ := report.LogFigures(path, &errs)
	if f.StillAllocated || !strings.Contains(f.End, "not known") || !strings.Contains(f.Caveat, "40 records lost") {
		t.Errorf("closing figures %+v", f)
	}
}

// TestReadersAgreeLostRecordsEndToEnd: a real run with lost records (a
// 64K ring buffer and 16-frame stacks on four threads allocating at full
// speed), read by every reader.
func TestReadersAgreeLostRecordsEndToEnd(t *testing.T) {
	requireBPF(t)
	memtrace := need(t, "bin/memtrace")
	prog := need(t, "tests/progs/build/threads")
	dir := t.TempDir()
	path := filepath.Join(dir, "run.log")
	var m *analysis.Model
	for attempt := 0; attempt < 8; attempt++ {
		cmd := command(memtrace, "--buffer-size", "64K", "--stack-depth", "16", "-o", path, "--", prog)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := runCmd(t, cmd, 2*time.Minute); err != nil {
			t.Fatalf("memtrace: %v\n%s", err, stderr.String())
		}
		m = analysis.New()
		if err := m.ReadAll(bytes.NewReader(bpfLog(t, path))); err != nil {
			t.Fatal(err)
		}
		if m.LostEvents > 0 {
			break
		}
	}
	if m.LostEvents == 0 {
		t.Skip("no record lost in 8 runs with a 64K buffer: nothing to compare")
	}
	agree(t, everyReader(t, path), true)
	if text, _ := m.ProcEnd(0); !m.Procs[0].Exited && (text == "interrupted" || text == "detached") {
		t.Errorf("the exit line is missing and records were lost: the run end is %q, which the log does not prove", text)
	}
}

// memviewHeader is memview's header for the log at path, as the viewer
// shows it once the log has ended (a simulated screen, the real model).
func memviewHeader(t *testing.T, path string) viewer.Header {
	t.Helper()
	m := analysis.New()
	m.Demangle = symbols.Demangle
	lf, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := m.ReadAll(lf); err != nil {
		t.Fatal(err)
	}
	sim := tcell.NewSimulationScreen("UTF-8")
	if err := sim.Init(); err != nil {
		t.Fatal(err)
	}
	defer sim.Fini()
	app := viewer.New(sim, m, viewer.Options{Source: filepath.Base(path)})
	app.SetEnded(nil)
	return app.HeaderInfo()
}
