package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/units"
)

// figuresSrc grows slowly (snapshots are taken on the way up), peaks with
// ten blocks from grow_b on top of twenty from grow_a, frees down to ten
// blocks of grow_a and idles, so that snapshots follow the peak too.
const figuresSrc = `#include <stdlib.h>
#include <string.h>
#include <unistd.h>
__attribute__((noinline)) void *grow_a(size_t n) { void *p = malloc(n); memset(p, 1, n); return p; }
__attribute__((noinline)) void *grow_b(size_t n) { void *p = malloc(n); memset(p, 2, n); return p; }
int main(void) {
	void *a[20], *b[10];
	for (int i = 0; i < 20; i++) { a[i] = grow_a(1000 + i); usleep(8000); }
	for (int i = 0; i < 10; i++) b[i] = grow_b(5000 + i);
	for (int i = 0; i < 10; i++) free(b[i]);
	for (int i = 0; i < 10; i++) free(a[i]);
	usleep(250000);
	return 0;
}
`

// TestFiguresAgree: one traced run, three readers of its peak. The last
// --interval snapshot line, the --report-dir file written at exit and
// memtrace report on the log give the same peak, peak time and bytes live
// at exit; the report-dir's stacks live at the peak are the report's peak
// ranking (blocks, and bytes in the one unit convention).
func TestFiguresAgree(t *testing.T) {
	requireBPF(t)
	bin := buildC(t, "figures", figuresSrc, "-g", "-fno-omit-frame-pointer")
	dir := t.TempDir()
	log, reports := filepath.Join(dir, "log"), filepath.Join(dir, "reports")
	if code, _, se := memtraceRun(t, nil, "--stack-depth", "8", "--interval", "50ms", "--report-dir", reports, "-o", log, "--", bin); code != 0 {
		t.Fatalf("memtrace exit %d: %s", code, se)
	}
	b := bpfLog(t, log)

	// The last snapshot of the program's process.
	var pid string
	if m := regexp.MustCompile(`(?m)^\[memtrace\] header .* pid=(\d+)`).FindSubmatch(b); m != nil {
		pid = string(m[1])
	}
	snaps := regexp.MustCompile(`(?m)^\[memtrace\] snapshot pid=`+pid+` ts=\d+ current=(\d+) peak=(\d+) peak_ts=(\d+) `).FindAllSubmatch(b, -1)
	if pid == "" || len(snaps) < 2 {
		t.Fatalf("pid %q, %d snapshots in the log:\n%s", pid, len(snaps), grepLines(b, "[memtrace] "))
	}
	last := snaps[len(snaps)-1]
	snapPeak, snapPeakTS := string(last[2]), string(last[3])

	// The --report-dir file's head.
	txts, _ := filepath.Glob(filepath.Join(reports, "figures-*_*.txt"))
	if len(txts) != 1 {
		t.Fatalf("report dir holds %v", txts)
	}
	rep, err := os.ReadFile(txts[0])
	if err != nil {
		t.Fatal(err)
	}
	head := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(rep))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if !ok {
			break
		}
		head[k] = v
	}

	// memtrace report.
	code, out, se := memtraceRun(t, nil, "report", "--json", "-", log)
	if code != 0 {
		t.Fatalf("report exit %d: %s", code, se)
	}
	type entry struct {
		PeakCount int64 `json:"peak_count"`
		PeakBytes int64 `json:"peak_bytes"`
		Stack     []struct {
			Function string `json:"function"`
		} `json:"stack"`
	}
	var j struct {
		Summary struct {
			PeakBytes   int64   `json:"peak_bytes"`
			PeakTimeS   float64 `json:"peak_time_s"`
			LeakedBytes int64   `json:"leaked_bytes"`
			Unknown     int64   `json:"unknown_blocks"`
		} `json:"summary"`
		Rankings struct{ Peak []entry } `json:"rankings"`
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	reportPeak := strconv.FormatInt(j.Summary.PeakBytes, 10)
	reportPeakTS := strconv.FormatInt(int64(math.Round(j.Summary.PeakTimeS*1e6)), 10)
	if j.Summary.PeakBytes < 20*1000+10*5000 || j.Summary.Unknown != 0 {
		t.Fatalf("report summary %+v: the program's own peak is at least 70000 bytes", j.Summary)
	}
	if snapPeak != reportPeak || head["peak_bytes"] != reportPeak {
		t.Errorf("peak: snapshot %s, --report-dir %s, report %s", snapPeak, head["peak_bytes"], reportPeak)
	}
	if snapPeakTS != reportPeakTS || head["peak_us"] != reportPeakTS {
		t.Errorf("peak time (µs): snapshot %s, --report-dir %s, report %s", snapPeakTS, head["peak_us"], reportPeakTS)
	}
	if leaked := strconv.FormatInt(j.Summary.LeakedBytes, 10); head["current_bytes"] != leaked {
		t.Errorf("live at exit: --report-dir %s, report leaked %s", head["current_bytes"], leaked)
	}

	// The stacks live at the peak, by their first function.
	for _, fn := range []string{"grow_a", "grow_b"} {
		var e *entry
		for k := range j.Rankings.Peak {
			if s := j.Rankings.Peak[k].Stack; len(s) > 0 && s[0].Function == fn {
				e = &j.Rankings.Peak[k]
				break
			}
		}
		if e == nil {
			t.Errorf("the report's peak ranking has no %s:\n%s", fn, out)
			continue
		}
		want := fmt.Sprintf("%s in %d blocks\n      %s < ", units.Bytes(uint64(e.PeakBytes)), e.PeakCount, fn)
		if !strings.Contains(string(rep), want) {
			t.Errorf("--report-dir's peak stacks lack %q (report: %d bytes in %d blocks):\n%s", want, e.PeakBytes, e.PeakCount, rep)
		}
	}
}
