package report

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
)

// reportJSON runs the report with --json and --html next to the text.
func reportAll(t *testing.T, log string, args ...string) (text string, j jsonReport, html string) {
	t.Helper()
	dir := t.TempDir()
	jp, hp := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	out, errs, code := runMain(t, append([]string{"--resolve", "0", log}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, errs, code := runMain(t, append([]string{"--resolve", "0", "--json", jp, "--html", hp, log}, args...)...); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	raw, err := os.ReadFile(jp)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	h, err := os.ReadFile(hp)
	if err != nil {
		t.Fatal(err)
	}
	return out, j, string(h)
}

var (
	stackLost  = []fr{{"hammer", 0x10}, {"thread_main", 0x20}}
	stackLeak  = []fr{{"_Z4keepv", 0x30}, {"main", 0x40}}
	stackWhole = []fr{{"whole_site", 0x50}, {"main", 0x60}, {"__libc_start_main", 0x70}}
	stackCut   = []fr{{"cut_site", 0x80}, {"helper", 0x90}}
	stackDeep  = []fr{{"deep_site", 0xa0}, {"level1", 0xb0}, {"level2", 0xc0}}
)

// lostLog: four threads hammer malloc; the tracer lost 6 records, among
// them the frees of three 32-byte blocks whose addresses were handed out
// again (unknown, not leaks); one 500-byte block was never seen again (a
// leak, perhaps overstated).
func lostLog(lost bool) []byte {
	l := &lb{}
	l.meta(logfmt.WordHeader, "version", "test", "pid", "300", "comm", "hammer", "mode", "bpf")
	ts := uint64(10)
	for k := 0; k < 3; k++ {
		ptr := uint64(0x1000 + k*0x40)
		tid := int64(301 + k)
		name := fmt.Sprintf("hammer-%d", k)
		l.alloc(tid, name, "malloc", ts, 32, ptr, stackLost...) // its free lost
		ts++
		l.alloc(tid, name, "malloc", ts, 32, ptr, stackLost...) // the same address again
		ts++
		l.free(tid, name, ts, 32, ptr)
		ts++
	}
	l.alloc(300, "hammer", "malloc", ts, 500, 0x9000, stackLeak...)
	if lost {
		l.meta(logfmt.WordLost, "count", "6", "total", "6", "ts", "40")
	}
	// It exited: its live blocks are leaks (without this line the log
	// would say memtrace was interrupted).
	l.meta(logfmt.WordProc, "event", "exit", "pid", "300", "ts", "41", "status", "0")
	l.meta(logfmt.WordSummary, "events", "10", "lost", map[bool]string{true: "6", false: "0"}[lost])
	return l.b
}

func TestLostRecordsReport(t *testing.T) {
	text, j, html := reportAll(t, writeFile(t, "lost.log", lostLog(true)))
	mustContain(t, text,
		"total memory leaked: 500B (1 leaks)\n",
		"3 blocks, 96B: unknown (records lost): not freed in the log, but their memory was allocated again",
		"LOST EVENTS: 6 ",
		"leaks may be overstated: a leak above may be a block whose free was among the 6 lost records\n",
	)
	leaks := text[strings.Index(text, "MEMORY LEAKS"):strings.Index(text, "MOST TEMPORARY")]
	if strings.Contains(leaks, "hammer") || !strings.Contains(leaks, "keep()") {
		t.Fatalf("leak ranking lists the blocks whose frees were lost:\n%s", leaks)
	}
	s := j.Summary
	if j.Leaks != 1 || j.LeakedBytes != 500 || s.UnknownBlocks != 3 || s.UnknownBytes != 96 || !s.LeaksOverstated || s.LostEvents != 6 {
		t.Fatalf("JSON summary %+v (leaks %d)", s, j.Leaks)
	}
	if p := j.Processes[0].Summary; p.UnknownBlocks != 3 || p.Leaks != 1 {
		t.Fatalf("process summary %+v", p)
	}
	mustContain(t, html, "<th>unknown (records lost)</th>", "3 blocks, 96B", "<th>leaks may be overstated</th>")

	// The same log without lost records: a complete log that misses frees
	// keeps them as leaks, and nothing is said about overstatement.
	text, j, _ = reportAll(t, writeFile(t, "complete.log", lostLog(false)))
	mustContain(t, text, "total memory leaked: 596B (4 leaks)\n")
	if strings.Contains(text, "unknown (records lost)") || strings.Contains(text, "overstated") {
		t.Fatalf("unknown blocks without lost records:\n%s", text)
	}
	if j.Summary.UnknownBlocks != 0 || j.Summary.LeaksOverstated {
		t.Fatalf("JSON %+v", j.Summary)
	}
}

func truncLog() []byte {
	l := &lb{}
	l.meta(logfmt.WordHeader, "version", "test", "pid", "400", "comm", "cut", "mode", "bpf")
	stack := func(reason string) { l.meta(logfmt.WordStack, "truncated", "1", "reason", reason) }
	l.alloc(1, "cut", "malloc", 10, 64, 0x100, stackWhole...)
	l.alloc(1, "cut", "malloc", 11, 64, 0x200, stackCut...)
	stack("fp")
	l.alloc(1, "cut", "malloc", 12, 64, 0x300, stackCut...)
	stack("fp")
	l.alloc(1, "cut", "malloc", 13, 64, 0x400, stackDeep...)
	stack("depth")
	l.alloc(1, "cut", "malloc", 14, 64, 0x500, stackWhole...)
	return l.b
}

// block is the text of the ranking entry (up to the blank line) whose
// first frame is fn.
func block(t *testing.T, ranking, fn string) string {
	t.Helper()
	for _, b := range strings.Split(ranking, "\n\n") {
		lines := strings.Split(b, "\n")
		for i := 1; i < len(lines); i++ {
			if lines[i] == fn && strings.HasSuffix(lines[i-1], " from") {
				return b
			}
		}
	}
	t.Fatalf("no entry for %s in\n%s", fn, ranking)
	return ""
}

func TestTruncatedStacksReport(t *testing.T) {
	text, j, html := reportAll(t, writeFile(t, "cut.log", truncLog()))
	mustContain(t, text, "truncated call stacks: 2 stacks in 3 events (fp: 1 stacks, 2 events; depth: 1 stacks, 1 events); marked [truncated: REASON] in the rankings\n")
	calls := text[:strings.Index(text, "PEAK MEMORY")]
	if b := block(t, calls, "cut_site"); !strings.Contains(b, "    helper\n      in /nonexistent/app\n    … [truncated: fp]") {
		t.Fatalf("cut stack not marked after its last frame:\n%s", b)
	}
	if b := block(t, calls, "deep_site"); !strings.Contains(b, "… [truncated: depth]") {
		t.Fatalf("depth-cut stack not marked:\n%s", b)
	}
	if b := block(t, calls, "whole_site"); strings.Contains(b, "truncated") || strings.Contains(b, "…") {
		t.Fatalf("a whole stack is marked:\n%s", b)
	}
	ts := j.Summary.TruncatedStacks
	want := []jsonTruncReason{{"fp", 1, 2}, {"depth", 1, 1}}
	if ts.Stacks != 2 || ts.Events != 3 || !slices.Equal(ts.Reasons, want) {
		t.Fatalf("JSON truncated_stacks %+v", ts)
	}
	marks := map[string][]string{}
	for _, e := range j.Rankings.get("calls") {
		marks[e.Stack[0].Function] = e.Truncated
	}
	if !slices.Equal(marks["cut_site"], []string{"fp"}) || !slices.Equal(marks["deep_site"], []string{"depth"}) || marks["whole_site"] != nil {
		t.Fatalf("JSON ranking marks %v", marks)
	}
	mustContain(t, html, "<th>truncated call stacks</th><td>2 stacks in 3 events; fp: 1 stacks, 2 events; depth: 1 stacks, 1 events</td>")
	rows := regexp.MustCompile(`<tr><td>\d+</td>.*?</tr>`).FindAllString(html, -1)
	var cut, whole int
	for _, r := range rows {
		switch {
		case strings.Contains(r, "<code>cut_site"):
			cut++
			if !strings.Contains(r, `<span class="trunc">[truncated: fp]</span>`) {
				t.Fatalf("HTML row of the cut stack unmarked: %s", r)
			}
		case strings.Contains(r, "<code>whole_site"):
			whole++
			if strings.Contains(r, "truncated") {
				t.Fatalf("HTML row of the whole stack marked: %s", r)
			}
		}
	}
	if cut == 0 || whole == 0 {
		t.Fatalf("HTML rows: %d cut, %d whole", cut, whole)
	}
	// A comparison with itself still marks the stacks.
	_, jd, _ := reportAll(t, writeFile(t, "cut2.log", truncLog()), "-d", writeFile(t, "base.log", truncLog()))
	if jd.Diff == nil || jd.Summary.TruncatedStacks.Stacks != 2 {
		t.Fatalf("diff JSON %+v", jd.Summary.TruncatedStacks)
	}
}

// One event followed by many frame lines: the report keeps 127 frames of
// it and says how many it skipped.
func TestFrameFloodReport(t *testing.T) {
	const n = 20000
	l := &lb{}
	l.alloc(1, "m", "malloc", 1, 8, 0x10)
	for i := 0; i < n; i++ {
		l.b = logfmt.AppendFrame(l.b, i, "/nonexistent/deep", fmt.Sprintf("_Z5deep%dv", i), uint64(i), 0x400000+uint64(i))
	}
	text, j, _ := reportAll(t, writeFile(t, "flood.log", l.b))
	mustContain(t, text, fmt.Sprintf("frame lines skipped: %d (more than 127 after one event", n-127))
	if j.Summary.SkippedFrames != n-127 {
		t.Fatalf("JSON skipped_frames %d", j.Summary.SkippedFrames)
	}
	top := j.Rankings.get("calls")[0]
	if len(top.Stack) != logfmt.MaxFrames || !slices.Equal(top.Truncated, []string{"max-frames"}) {
		t.Fatalf("kept %d frames, marked %v", len(top.Stack), top.Truncated)
	}
}

// Sizes and time stamps near 2^64: no figure wraps or goes negative.
func TestSaturatedFigures(t *testing.T) {
	l := &lb{}
	for i := 0; i < 200; i++ { // 200 × 2^56 > 2^63
		l.alloc(1, "big", "mmap", uint64(10+i), logfmt.MaxSize, uint64(i+1)<<40)
	}
	l.alloc(1, "big", "malloc", 300, 1<<64-1, 0x10) // not a size any tracer writes
	l.alloc(1, "big", "malloc", 1<<64-1, 8, 0x20)   // nor a time stamp
	log := writeFile(t, "huge.log", l.b)
	text, j, _ := reportAll(t, log)
	mustContain(t, text, "total memory leaked: 9.22E (200 leaks)\n", "peak heap memory consumption: 9.22E after 0.000137s\n", "unreadable lines skipped: 2\n", "total runtime: 0.000209s.\n")
	if regexp.MustCompile(`: -\d`).MatchString(text) {
		t.Fatalf("a negative figure:\n%s", text)
	}
	if j.LeakedBytes != math.MaxInt64 || j.PeakBytes != math.MaxInt64 || j.Summary.AllocatedBytes != math.MaxInt64 || j.Leaks != 200 {
		t.Fatalf("JSON figures %+v", j.Summary)
	}
	for _, e := range j.Rankings.get("leaks") {
		if e.LeakedBytes < 0 || e.AllocatedBytes < 0 {
			t.Fatalf("ranking entry %+v", e)
		}
	}
	// Compared with itself: every difference is zero, not a wrapped one.
	out, _, code := runMain(t, "--resolve", "0", log, "-d", log)
	if code != 0 {
		t.Fatalf("diff exit %d", code)
	}
	mustContain(t, out, "total memory leaked: 9.22E (base 9.22E, 0B)\n")
	// Two such logs added up stay at the bound.
	out, _, _ = runMain(t, "--resolve", "0", log, writeFile(t, "huge2.log", l.b))
	mustContain(t, out, "total memory leaked: 9.22E (400 leaks)\n")
}
