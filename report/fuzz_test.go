package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReport: any input gives a report in every format (exit 0), or one
// line that refuses it (binary, not a log: exit 1, nothing written), or
// the report of what was read before a compressed stream stopped and one
// line saying why (exit 1); never a crash, and the JSON's totals are its
// processes' sums.
func FuzzReport(f *testing.F) {
	known := knownLog()
	f.Add(known)
	f.Add(known[:len(known)/2])
	f.Add(baseLog())
	f.Add([]byte(fdReportLog))
	f.Add(richLog(300, 1))
	f.Add(lostLog(true))
	f.Add(truncLog())
	f.Add([]byte("[memtrack] tid=1 (m) mmap ts=1 size=72057594037927936 total=1 ptr=0x10\n[memtrack] tid=1 (m) mmap ts=2 size=72057594037927936 total=1 ptr=0x20\n[memtrack] tid=1 (m) malloc ts=3 size=18446744073709551615 total=1 ptr=0x30\n"))
	f.Add([]byte("[memtrack] tid=1 (a) free ts=5 ptr=0x10\n[memtrack]   #0 ./x(f+0x1) [0x2]\n\x00\xff"))
	f.Add([]byte("[memtrace] header pid=1\n[memtrace] thread tid=2 pid=3\n[memtrack] tid=2 (b) malloc ts=1 size=5 total=5 ptr=0x9\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		log := filepath.Join(dir, "f.log")
		if err := os.WriteFile(log, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out, errs, code := runMain(t, log, "--json", filepath.Join(dir, "j"), "--html", filepath.Join(dir, "h"), "--massif", filepath.Join(dir, "m"),
			"--pprof", filepath.Join(dir, "p"), "--folded", filepath.Join(dir, "f"), "--resolve", "0", "-d", log)
		// An empty input or one without a log line is refused in
		// memview's words ("x is empty: not a memtrace or memtrack log").
		notLog := strings.Contains(errs, "not a log") || strings.Contains(errs, "not a memtrace or memtrack log")
		if code == 1 && strings.Count(errs, "\n") == 1 && out == "" && notLog {
			return
		}
		if (code != 0 && (code != 1 || !strings.Contains(errs, "READ STOPPED") && !strings.Contains(errs, "the report covers what was read before"))) || out == "" {
			t.Fatalf("exit %d, stderr %q", code, errs)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "j"))
		if err != nil {
			t.Fatal(err)
		}
		var j jsonReport
		if err := json.Unmarshal(raw, &j); err != nil {
			t.Fatal(err)
		}
		var calls, leaks int64
		for _, p := range j.Processes {
			calls += p.Summary.Calls
			leaks += p.Summary.Leaks
			if p.Summary.PeakBytes < 0 || p.Summary.Temporary > p.Summary.Calls || p.Summary.Leaks > p.Summary.Calls ||
				p.Summary.LeakedBytes < 0 || p.Summary.AllocatedBytes < 0 || p.Summary.UnknownBytes < 0 || p.Summary.Leaks+p.Summary.UnknownBlocks > p.Summary.Calls {
				t.Fatalf("impossible figures %+v", p.Summary)
			}
		}
		if calls != j.Calls || leaks != j.Leaks {
			t.Fatalf("totals %d/%d, processes add up to %d/%d", j.Calls, j.Leaks, calls, leaks)
		}
		for _, v := range j.Diff.Summary {
			if v[2] != 0 && v[0] != v[1] {
				continue
			}
			if v[2] != 0 {
				t.Fatalf("a log compared with itself differs: %v", j.Diff.Summary)
			}
		}
	})
}
