package report

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/logfmt"
)

// lb builds logs through logfmt, the one writer.
type lb struct{ b []byte }

type fr struct {
	sym string
	off uint64
}

func (l *lb) meta(word string, kv ...string) *lb {
	var kvs []logfmt.KV
	for i := 0; i+1 < len(kv); i += 2 {
		kvs = append(kvs, logfmt.KV{Key: kv[i], Value: kv[i+1]})
	}
	l.b = logfmt.AppendMeta(l.b, word, kvs...)
	return l
}

func (l *lb) frames(frames []fr) {
	for i, f := range frames {
		l.b = logfmt.AppendFrame(l.b, i, "/nonexistent/app", f.sym, f.off, 0x400000+f.off)
	}
}

func (l *lb) alloc(tid int64, name, op string, ts, size, ptr uint64, frames ...fr) *lb {
	l.b = logfmt.AppendAlloc(l.b, tid, name, op, ts, size, 0, ptr)
	l.frames(frames)
	return l
}

func (l *lb) free(tid int64, name string, ts, size, ptr uint64) *lb {
	l.b = logfmt.AppendFree(l.b, tid, name, "free", ts, size, ptr)
	return l
}

// ended closes a memtrace log as the tracer does when its processes
// exit: their exit lines and the summary. A memtrace log without the
// summary was cut short, and its blocks are live at the cut, not leaks.
func (l *lb) ended(ts uint64, pids ...int64) *lb {
	for _, p := range pids {
		l.b = logfmt.AppendProc(l.b, logfmt.Proc{Event: logfmt.ProcExit, PID: p, TS: ts, HasStatus: true})
	}
	l.b = logfmt.AppendSummary(l.b, logfmt.Summary{})
	return l
}

func (l *lb) exit(tid int64, name string, ts uint64) *lb {
	l.b = logfmt.AppendExit(l.b, tid, name, ts, 0)
	return l
}

var (
	stackA = []fr{{"make_tmp", 0x10}, {"main", 0x20}}
	stackB = []fr{{"_ZN5cache3putEv", 0x30}, {"main", 0x40}}
	stackC = []fr{{"_Z4growm", 0x50}, {"worker_run", 0x60}}
)

// knownLog is a log whose figures are worked out by hand:
//
//	calls 7 (A 3 × 100, B 2 × 1000, C 1 × 5000, malloc without stack 1 × 10)
//	temporary 3 (every A: freed by its thread before that thread allocates again)
//	peak 7000 at ts 18 (B, B, C live); C was freed by another thread: not temporary
//	leaks 3, 2010 bytes (both B and the stackless malloc); runtime 21 µs
func knownLog() []byte {
	l := &lb{}
	l.meta(logfmt.WordHeader, "version", "test", "pid", "100", "comm", "app", "cmd", "./app --known")
	l.alloc(1, "app", "malloc", 10, 100, 0x100, stackA...).free(1, "app", 11, 100, 0x100)
	l.alloc(1, "app", "malloc", 12, 100, 0x100, stackA...).free(1, "app", 13, 100, 0x100)
	l.alloc(1, "app", "new", 14, 1000, 0x200, stackB...)
	l.alloc(2, "worker", "malloc", 15, 5000, 0x300, stackC...)
	l.alloc(1, "app", "malloc", 16, 100, 0x110, stackA...).free(1, "app", 17, 100, 0x110)
	l.alloc(1, "app", "new", 18, 1000, 0x210, stackB...)
	l.free(1, "app", 19, 5000, 0x300)
	l.alloc(2, "worker", "malloc", 20, 10, 0x400)
	l.exit(2, "worker", 21)
	l.ended(21, 100)
	return l.b
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runMain(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb)
	return out.String(), errb.String(), code
}

func mustContain(t *testing.T, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("output lacks %q\n--- output ---\n%s", w, got)
		}
	}
}

func TestTextKnownFigures(t *testing.T) {
	log := writeFile(t, "known.log", knownLog())
	out, errs, code := runMain(t, log)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	mustContain(t, out,
		"memtrace report of pid 100 app (known.log)\ncommand: ./app --known\n",
		"MOST CALLS TO ALLOCATION FUNCTIONS\n3 calls to allocation functions with 0B peak consumption from\nmake_tmp\n  in /nonexistent/app\n3 calls with 0B peak consumption from:\n    main\n      in /nonexistent/app\n",
		"PEAK MEMORY CONSUMERS\n5.00K peak memory consumed over 1 calls from\ngrow(unsigned long)\n",
		"2.00K peak memory consumed over 2 calls from\ncache::put()\n",
		"MEMORY LEAKS\n2.00K leaked over 2 calls from\ncache::put()\n",
		"10B leaked over 1 calls from\n[no stack] malloc (no call stack recorded)\n",
		"MOST TEMPORARY ALLOCATIONS\n3 temporary allocations of 3 allocations in total (100.00%) from\nmake_tmp\n",
		"total runtime: 0.000021s.\n",
		"calls to allocation functions: 7 (333333/s)\n",
		"temporary memory allocations: 3 (142857/s)\n",
		"peak heap memory consumption: 7.00K after 0.000018s\n",
		"total memory leaked: 2.01K (3 leaks)\n",
	)
	// The order of the rankings is heaptrack_print's.
	order := []string{"MOST CALLS", "PEAK MEMORY", "MEMORY LEAKS", "MOST TEMPORARY", "total runtime"}
	last := -1
	for _, o := range order {
		i := strings.Index(out, o)
		if i < last {
			t.Fatalf("%s out of order", o)
		}
		last = i
	}
}

func TestSectionSwitchesAndLimits(t *testing.T) {
	log := writeFile(t, "known.log", knownLog())
	// heaptrack_print's spelling (-a 0, -T 0) and Go's (-p=0), flags after
	// the log too.
	out, _, code := runMain(t, "-a", "0", log, "-p=0", "-T", "off", "-n", "1")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if strings.Contains(out, "MOST CALLS") || strings.Contains(out, "PEAK MEMORY") || strings.Contains(out, "TEMPORARY ALLOCATIONS") {
		t.Fatalf("switched-off sections printed:\n%s", out)
	}
	mustContain(t, out, "MEMORY LEAKS\n2.00K leaked over 2 calls from\n")
	if strings.Contains(out, "[no stack] malloc") {
		t.Fatalf("-n 1 printed a second leak entry:\n%s", out)
	}
	out, _, _ = runMain(t, "-l", "0", "--", log)
	if strings.Contains(out, "MEMORY LEAKS") || !strings.Contains(out, "MOST CALLS") {
		t.Fatalf("-l 0 -- LOG:\n%s", out)
	}
	// -s 0: no stacks under an entry, their cost as "other places".
	out, _, _ = runMain(t, "-s", "0", "-a", "0", "-p", "0", "-T", "0", log)
	mustContain(t, out, "2.00K leaked over 2 calls from\ncache::put()\n  in /nonexistent/app\n  and 2.00K from 1 other places\n")
}

func TestJSONKnownFigures(t *testing.T) {
	log := writeFile(t, "known.log", knownLog())
	out, _, code := runMain(t, "--json", "-", log)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var j jsonReport
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if j.Calls != 7 || j.Temporary != 3 || j.PeakBytes != 7000 || j.LeakedBytes != 2010 || j.Leaks != 3 {
		t.Fatalf("top-level figures %+v", j)
	}
	if s := j.Summary; s.RuntimeS != 0.000021 || s.PeakTimeS != 0.000018 || s.AllocatedBytes != 7310 || s.Events != 11 {
		t.Fatalf("summary %+v", s)
	}
	if len(j.Processes) != 1 || j.Processes[0].PID != 100 || j.Processes[0].Comm != "app" {
		t.Fatalf("processes %+v", j.Processes)
	}
	top := j.Rankings.get("leaks")[0]
	if top.LeakedBytes != 2000 || top.Leaks != 2 || len(top.Stack) != 2 || top.Stack[0].Function != "cache::put()" || top.Stack[0].Symbol != "_ZN5cache3putEv" {
		t.Fatalf("top leak %+v", top)
	}
	if p := j.Rankings.get("peak"); len(p) != 2 || p[0].PeakBytes != 5000 || p[1].PeakBytes != 2000 || p[1].PeakCount != 2 {
		t.Fatalf("peak ranking %+v", p)
	}
	if tmp := j.Rankings.get("temporary"); len(tmp) != 1 || tmp[0].Temporary != 3 || tmp[0].TemporaryBytes != 300 {
		t.Fatalf("temporary ranking %+v", tmp)
	}
	if c := j.Rankings.get("calls"); len(c) != 4 || c[0].Calls != 3 || c[3].Op != "malloc" || len(c[3].Stack) != 0 {
		t.Fatalf("calls ranking %+v", c)
	}
}

// baseLog is knownLog's program before a change: one A call less, one B
// leak less, and a site D that went away.
func baseLog() []byte {
	l := &lb{}
	l.meta(logfmt.WordHeader, "version", "test", "pid", "90", "comm", "app", "cmd", "./app --known")
	l.alloc(1, "app", "malloc", 10, 100, 0x100, stackA...).free(1, "app", 11, 100, 0x100)
	l.alloc(1, "app", "malloc", 12, 100, 0x100, stackA...).free(1, "app", 13, 100, 0x100)
	l.alloc(1, "app", "new", 14, 1000, 0x200, stackB...)
	l.alloc(1, "app", "malloc", 15, 64, 0x500, fr{"old_path", 1}, fr{"main", 2})
	l.free(1, "app", 16, 64, 0x500)
	l.ended(16, 90)
	return l.b
}

func TestDiff(t *testing.T) {
	after := writeFile(t, "after.log", knownLog())
	// Other offsets in the base (a rebuilt binary): merged by function,
	// the stacks still match.
	baseText := strings.ReplaceAll(string(baseLog()), "make_tmp+0x10", "make_tmp+0x18")
	base := writeFile(t, "base.log", []byte(baseText))
	out, _, code := runMain(t, after, "-d", base, "-m", "1")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	mustContain(t, out,
		"memtrace report: after.log compared with base.log",
		"MOST CALLS TO ALLOCATION FUNCTIONS (LOG minus BASE)\n",
		"+1 calls to allocation functions with +5.00K peak consumption from\ngrow(unsigned long)\n",
		"+1 calls to allocation functions with 0B peak consumption from\nmake_tmp\n",
		"-1 calls to allocation functions with -64B peak consumption from\nold_path\n",
		"MEMORY LEAKS (LOG minus BASE)\n+1000B leaked over +1 calls from\ncache::put()\n", // heaptrack_print: 1000B, not 1.00K
		"calls to allocation functions: 7 (base 4, +3)\n",
		"peak heap memory consumption: 7.00K (base 1.06K, +5.94K)\n",
		"total memory leaked: 2.01K (base 1000B, +1.01K)\n",
	)
	// Without merging the rebuilt make_tmp is another stack.
	out, _, _ = runMain(t, after, "-d", base, "-m", "0", "-a", "1", "-p", "0", "-l", "0", "-T", "0")
	mustContain(t, out, "+3 calls to allocation functions", "-2 calls to allocation functions")

	js, _, _ := runMain(t, after, "--diff", base, "-m", "1", "--json", "-")
	var j jsonReport
	if err := json.Unmarshal([]byte(js), &j); err != nil {
		t.Fatal(err)
	}
	if j.Diff == nil || j.Diff.Summary["calls"] != [3]float64{7, 4, 3} || j.Diff.Summary["leaked_bytes"] != [3]float64{2010, 1000, 1010} {
		t.Fatalf("diff summary %+v", j.Diff)
	}
	top := j.Diff.Rankings.get("peak")[0]
	if top.Delta.PeakBytes != 5000 || top.After.PeakBytes != 5000 || top.Before.PeakBytes != 0 || top.Stack[0].Function != "grow(unsigned long)" {
		t.Fatalf("diff peak %+v", top)
	}
}

func TestSuppressions(t *testing.T) {
	log := writeFile(t, "known.log", knownLog())
	sup := writeFile(t, "leaks.supp", []byte("# known\nleak:cache::*\ncalled_from_lib:libfoo\nleak:^nomatch$\n"))
	out, errs, code := runMain(t, log, "--suppressions", sup, "--print-suppressions")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	mustContain(t, errs, "leaks.supp:3: not a leak:PATTERN line, skipped")
	mustContain(t, out,
		"total memory leaked: 10B (1 leaks)\n  of which malloc family 10B (1 blocks), mmap 0B (0 mappings)\nsuppressed leaks: 2.00K (2 leaks)\n",
		"leak:cache::*  ("+sup+":2) matched 2 leaks, 2.00K, in 1 call stacks\n",
		"leak:^nomatch$  ("+sup+":4) matched 0 leaks, 0B, in 0 call stacks\n",
		"suppressed in total: 2.00K (2 leaks)\n",
	)
	if strings.Contains(out, "leaked over 2 calls from\ncache::put()") {
		t.Fatalf("suppressed stack still ranked:\n%s", out)
	}
	// Patterns match the mangled name and the module too; anchors hold.
	for pat, want := range map[string]bool{"_ZN5cache": true, "^cache::put()$": true, "^put": false, "nonexistent/app": true, "*put*": true, "put$": false} {
		sup := writeFile(t, "s.supp", []byte("leak:"+pat+"\n"))
		out, _, _ := runMain(t, log, "--suppressions", sup, "-a", "0", "-p", "0", "-T", "0")
		got := !strings.Contains(out, "cache::put()")
		if pat == "nonexistent/app" {
			got = strings.Contains(out, "total memory leaked: 10B")
		}
		if got != want {
			t.Errorf("pattern %q: suppressed %v, want %v", pat, got, want)
		}
	}
}

func TestFolded(t *testing.T) {
	log := writeFile(t, "known.log", knownLog())
	dir := t.TempDir()
	want := map[string]string{
		"allocations": "[no stack];malloc 1\nmain;cache::put() 2\nmain;make_tmp 3\nworker_run;grow(unsigned long) 1\n",
		"temporary":   "main;make_tmp 3\n",
		"leaked":      "[no stack];malloc 10\nmain;cache::put() 2000\n",
		"peak":        "main;cache::put() 2000\nworker_run;grow(unsigned long) 5000\n",
	}
	for cost, w := range want {
		p := filepath.Join(dir, cost+".folded")
		if _, errs, code := runMain(t, log, "--folded", p, "--cost", cost); code != 0 {
			t.Fatalf("%s: exit %d %s", cost, code, errs)
		}
		got, _ := os.ReadFile(p)
		if string(got) != w {
			t.Errorf("%s:\n got %q\nwant %q", cost, got, w)
		}
	}
	if _, errs, code := runMain(t, log, "--folded", "-", "--cost", "bogus"); code != 2 || !strings.Contains(errs, "bad --cost") {
		t.Fatalf("bad cost: %d %q", code, errs)
	}
}

// A log with two processes (a fork) and a second log: a section each and
// a merged one whose figures are their sums.
func TestManyProcesses(t *testing.T) {
	l := &lb{}
	l.meta(logfmt.WordHeader, "version", "test", "pid", "1", "comm", "parent")
	l.meta(logfmt.WordThread, "tid", "1", "pid", "1", "name", "parent")
	l.meta(logfmt.WordThread, "tid", "2", "pid", "2", "name", "child")
	l.meta(logfmt.WordProc, "event", "fork", "pid", "2", "ppid", "1", "comm", "child")
	l.alloc(1, "parent", "malloc", 5, 100, 0x10, stackA...)
	l.alloc(2, "child", "malloc", 6, 300, 0x10, stackA...) // same address, other process
	l.free(2, "child", 7, 300, 0x10)
	l.alloc(1, "parent", "new", 8, 1000, 0x20, stackB...)
	l.ended(9, 1, 2)
	forked := writeFile(t, "forked.log", l.b)
	known := writeFile(t, "known.log", knownLog())
	out, _, code := runMain(t, forked, known, "--json", filepath.Join(t.TempDir(), "r.json"))
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	mustContain(t, out,
		"========== PID 1 PARENT (FORKED.LOG) ==========",
		"========== PID 2 CHILD (FORKED.LOG) ==========",
		"========== PID 100 APP (KNOWN.LOG) ==========",
		"========== ALL 3 PROCESSES ==========",
		"calls to allocation functions: 10 (",                                     // 2 + 1 + 7
		"peak heap memory consumption: 8.40K (the sum of 3 processes' own peaks)", // 1100 + 300 + 7000
		"total memory leaked: 3.11K (5 leaks)",                                    // 1100 + 2010
		// Stacks add up across processes and logs: A made 1 + 1 + 3 calls.
		"5 calls to allocation functions with 400B peak consumption from\nmake_tmp\n",
	)
	out, _, _ = runMain(t, forked, known, "--pid", "2,100", "-a", "0", "-p", "0", "-l", "0", "-T", "0")
	mustContain(t, out, "PID 2 CHILD", "ALL 2 PROCESSES", "calls to allocation functions: 8 (")
	if strings.Contains(out, "PARENT") {
		t.Fatalf("--pid kept the parent:\n%s", out)
	}
	if _, errs, code := runMain(t, forked, "--pid", "77"); code != 1 || !strings.Contains(errs, "no process") {
		t.Fatalf("--pid 77: %d %q", code, errs)
	}
}

func TestFilterFunction(t *testing.T) {
	log := writeFile(t, "known.log", knownLog())
	out, _, _ := runMain(t, log, "--filter-bt-function", "worker_run")
	mustContain(t, out, "calls to allocation functions: 1 (", "peak heap memory consumption: 5.00K", "total memory leaked: 0B (0 leaks)")
	if strings.Contains(out, "make_tmp") {
		t.Fatalf("filtered stack shown:\n%s", out)
	}
}

// Bad input gives a clear report or one clear line, never a crash.
func TestBadInput(t *testing.T) {
	known := knownLog()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(known)
	zw.Close()
	cases := []struct {
		name, data string
		code       int
		want       string
	}{
		{"truncated", string(known[:len(known)*2/3]), 0, "LIVE AT THE CUT (the log ends before the process did"},
		{"cut mid-line", string(known[:len(known)-7]), 0, "total memory leaked: 2.01K (3 leaks)"},
		{"frees only", string(logfmt.AppendFree(nil, 1, "a", "free", 1, 8, 0x10)), 0, "frees of blocks not seen allocated (made before tracing started, or lost): 1"},
		{"gzipped", gz.String(), 0, "total memory leaked: 2.01K (3 leaks)"},
		{"gzip cut", gz.String()[:gz.Len()/2], 1, "the compressed log ends early"},
		{"lost", string(append(append([]byte{}, known...), logfmt.AppendMeta(nil, logfmt.WordLost, logfmt.KV{Key: "count", Value: "5"}, logfmt.KV{Key: "total", Value: "5"})...)), 0, "LOST EVENTS: 5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeFile(t, strings.ReplaceAll(c.name, " ", "-")+".log", []byte(c.data))
			dir := t.TempDir()
			out, errs, code := runMain(t, p, "--json", filepath.Join(dir, "j"), "--html", filepath.Join(dir, "h"),
				"--massif", filepath.Join(dir, "m"), "--pprof", filepath.Join(dir, "p"), "--folded", filepath.Join(dir, "f"))
			if code != c.code {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			mustContain(t, out, c.want)
		})
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "no log given"},
		{[]string{"/nonexistent/run.log"}, 1, "open the log: open /nonexistent/run.log: no such file or directory"},
		{[]string{t.TempDir()}, 1, "is a directory, give a log file"},
		// Not a log: one line that names the file and quotes none of it.
		{[]string{writeFile(t, "empty.log", nil)}, 1, "memtrace report: empty.log is empty: not a memtrace or memtrack log"},
		{[]string{writeFile(t, "leaky.cc", []byte("hello\nworld\n\x01\x02 binary\n[memtrack] tid=zz (x) malloc ts=?\n"))}, 1,
			"leaky.cc is not a memtrace or memtrack log: none of its 4 lines read is a log line"},
		{[]string{"--bogus", "x"}, 2, "unknown option '--bogus' (see memtrace report --help)"},
		{[]string{"-n", "-3", "x"}, 2, "-n and -s take a count"},
		{[]string{"--json", "same", "--html", "same", "x"}, 2, "both write same"},
	} {
		_, errs, code := runMain(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 || strings.Contains(errs, "hello") {
			t.Errorf("%v: exit %d, stderr %q (want %d, %q, one line)", c.args, code, errs, c.code, c.want)
		}
	}
	if _, _, code := runMain(t, "-h"); code != 0 {
		t.Errorf("-h exit %d", code)
	}
}

func TestProgressLine(t *testing.T) {
	big := &lb{}
	for i := range 40000 {
		big.alloc(1, "app", "malloc", uint64(i), 16, uint64(0x1000+16*i), stackA...)
	}
	p := writeFile(t, "big.log", big.b)
	_, errs, _ := runMain(t, p, "--progress", "1", "-a", "0", "-p", "0", "-l", "0", "-T", "0")
	// The line may or may not have been drawn in 200 ms; if it was, it
	// names the log and is cleared.
	if errs != "" && (!strings.Contains(errs, "reading big.log") || !strings.HasSuffix(errs, "\r\x1b[K")) {
		t.Fatalf("progress %q", errs)
	}
	if _, errs, _ := runMain(t, p, "-a", "0"); errs != "" {
		t.Fatalf("progress on a non-terminal: %q", errs)
	}
	var buf bytes.Buffer
	update, clear := progressLine(&buf, "x.log")
	update(3<<20, 12<<20)
	clear()
	if got := buf.String(); got != "\rmemtrace report: reading x.log: 3 MB of 12 MB (25%)\x1b[K\r\x1b[K" {
		t.Fatalf("progress line %q", got)
	}
}

func TestCompilePattern(t *testing.T) {
	for _, c := range []struct {
		pat, s string
		want   bool
	}{
		{"foo", "xfooy", true}, {"^foo", "xfoo", false}, {"^foo", "foox", true}, {"foo$", "xfoo", true}, {"foo$", "foox", false},
		{"a*c", "abbbc", true}, {"a*c", "ca", false}, {"^a*c$", "abc", true}, {"^a*c$", "abcd", false}, {"std::vector<*>", "std::vector<int>::push", true},
		{"(x)", "f(x)", true}, {"*", "", true},
	} {
		if got := analysis.NewSuppression(c.pat, "t", 1).Matches([]analysis.SuppFrame{{Name: c.s}}); got != c.want {
			t.Errorf("%q on %q: %v", c.pat, c.s, got)
		}
	}
}

// TestPeakLegend: the text says which peak its figures are: a stack's
// peak consumption is what it held at the process's peak, as
// heaptrack_print 1.4 counts it (a 300K block freed before the 400K peak
// has 0B there and no place among the peak consumers), not its own
// maximum (issue 33).
func TestPeakLegend(t *testing.T) {
	a := []fr{{"site_a", 0x10}, {"main", 0x20}}
	b := []fr{{"site_b", 0x30}, {"main", 0x40}}
	l := &lb{}
	l.meta(logfmt.WordHeader, "version", "test", "pid", "100", "comm", "app")
	l.alloc(1, "app", "malloc", 10, 300000, 0x100, a...).free(1, "app", 11, 300000, 0x100)
	l.alloc(1, "app", "malloc", 12, 400000, 0x200, b...).free(1, "app", 13, 400000, 0x200)
	l.ended(14, 100)
	log := writeFile(t, "peak.log", l.b)
	out, errs, code := runMain(t, log)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	mustContain(t, out,
		"(peak.log)\n"+peakLegendOne+"\nMOST CALLS",
		"1 calls to allocation functions with 0B peak consumption from\nsite_a\n",
		"PEAK MEMORY CONSUMERS\n400.00K peak memory consumed over 1 calls from\nsite_b\n",
		"peak heap memory consumption: 400.00K after 0.000012s\n",
	)
	if peaks := out[strings.Index(out, "PEAK MEMORY CONSUMERS"):strings.Index(out, "MEMORY LEAKS")]; strings.Contains(peaks, "site_a") {
		t.Errorf("site_a, freed before the peak, is among the peak consumers:\n%s", peaks)
	}
	// Several processes: the merged section's peak is a sum, and so said.
	out, _, _ = runMain(t, log, writeFile(t, "known.log", knownLog()))
	if !strings.HasPrefix(out, peakLegendMulti+"\n") {
		t.Errorf("several logs: no legend of a merged peak first:\n%s", out)
	}
	// No ranking with peak figures, no legend.
	if out, _, _ = runMain(t, "-a", "0", "-p", "0", log); strings.Contains(out, "peak figures") {
		t.Errorf("-a 0 -p 0 still explains peak figures:\n%s", out)
	}
}
