package tests

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// closingFigures reads memtrace's closing lines (stderr) or the report's
// summary: calls, peak, and the leaked (or still allocated) line.
func closingFigures(t *testing.T, text string) (calls, peak, leaked string) {
	t.Helper()
	get := func(re string) string {
		m := regexp.MustCompile(re).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("no %s in\n%s", re, text)
		}
		return m[1]
	}
	return get(`calls to allocation functions: (\d+)`), get(`peak heap memory consumption: (\S+)`),
		get(`(?:total memory leaked|still allocated at detach): (\S+ \(\d+)`)
}

// TestClosingLinesMatchReport: a run ends with heaptrack-like closing
// lines on stderr whose figures are the report's on the same log, with the
// log's path and the commands that open it; without -o the log is
// memtrace.PROG.PID.log.zst in the current directory (heaptrack's naming),
// said when it opens and named by the closing lines, and stacks are on;
// with -o /dev/stderr it says once that the log is on stderr. Both
// tracers (eBPF and --preload), one run each for all but the last.
func TestClosingLinesMatchReport(t *testing.T) {
	bin, _ := buildSites(t)
	for _, mode := range []string{"bpf", "preload"} {
		var src []string
		if mode == "bpf" {
			requireBPF(t)
		} else {
			src = []string{"--preload"}
		}
		dir := t.TempDir()
		cmd := command(need(t, "bin/memtrace"), append(src, "--", bin)...)
		cmd.Dir = dir
		var so, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &stderr
		if err := runCmd(t, cmd, time.Minute); err != nil {
			t.Fatalf("%s without -o: %v\n%s", mode, err, stderr.String())
		}
		se := stderr.String()
		logs, _ := filepath.Glob(filepath.Join(dir, "memtrace."+filepath.Base(bin)+".*.log.zst"))
		if len(logs) != 1 {
			t.Fatalf("%s without -o: logs %v, want one memtrace.PROG.PID.log.zst\n%s", mode, logs, se)
		}
		log := logs[0]
		name := filepath.Base(log)
		data, _, err := decompress(t, log)
		if err != nil {
			t.Fatalf("%s without -o: %v", mode, err)
		}
		if want := "mode=" + mode; !bytes.Contains(data, []byte(want)) {
			t.Fatalf("%s without -o: the log's header does not say %s: a fallback wrote it", mode, want)
		}
		code, out, rse := memtraceRun(t, nil, "report", "-a", "0", "-p", "0", "-l", "0", "-T", "0", log)
		if code != 0 {
			t.Fatalf("%s: report exit %d: %s", mode, code, rse)
		}
		c1, p1, l1 := closingFigures(t, se)
		c2, p2, l2 := closingFigures(t, out)
		if c1 != c2 || p1 != p2 || l1 != l2 {
			t.Errorf("%s: closing lines say %s calls, peak %s, leaked %s; the report %s, %s, %s\n%s\n%s", mode, c1, p1, l1, c2, p2, l2, se, out)
		}
		if c1 != "1752" && mode == "bpf" {
			t.Errorf("bpf: %s calls, want 1752 (1100 + 550 + 100 + the pool + stdout's buffer)", c1)
		}
		for _, w := range []string{"memtrace: writing the log to " + name, "memtrace stats:\n", "\tlost events: 0\n", "the log is " + name + ";",
			"\n  memview " + name + "\n", "\n  memtrace report " + name} {
			if !strings.Contains(se, w) {
				t.Errorf("%s: closing lines lack %q:\n%s", mode, w, se)
			}
		}
		if strings.Count(se, "memtrace stats:") != 1 {
			t.Errorf("%s: closing lines not once:\n%s", mode, se)
		}
		// Stacks are on by default: the leaks have frames.
		if code, out, rse := memtraceRun(t, nil, "report", log); code != 0 || strings.Contains(out, "[no stack]") {
			t.Errorf("%s without flags: report exit %d, a stack missing:\n%s%s", mode, code, out, rse)
		}
	}
	code, _, se := memtraceRun(t, nil, "--preload", "-o", "/dev/stderr", "--", bin)
	if code != 0 {
		t.Fatalf("memtrace exit %d: %s", code, se)
	}
	lines := strings.Split(strings.TrimSpace(se), "\n")
	if n := strings.Count(se, "the log is on stderr"); n != 1 || !strings.Contains(lines[len(lines)-1], "the log is on stderr") {
		t.Errorf("-o /dev/stderr: want one last line saying the log is on stderr, got %d:\n%s", n, se)
	}
}
