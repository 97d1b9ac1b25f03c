package preload

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/logfmt"
)

// figuresProg grows slowly (snapshots are taken on the way up), peaks
// with ten blocks from grow_b on top of twenty from grow_a, frees down to
// ten blocks of grow_a and idles, so that snapshots follow the peak too.
const figuresProg = `#include <stdlib.h>
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

// TestSnapshotsAndReportDir: with Interval and ReportDir the preload path
// writes --interval snapshots and a --report-dir file per process, through
// the eBPF path's session: the last snapshot and the report file give the
// peak and the bytes live at exit that the log's own lines add up to, and
// the stack holding most at the peak is named from the library's frames.
func TestSnapshotsAndReportDir(t *testing.T) {
	lib, _ := build(t)
	t.Setenv(LibEnv, lib)
	dir := t.TempDir()
	src, prog := filepath.Join(dir, "figures.c"), filepath.Join(dir, "figures")
	if err := os.WriteFile(src, []byte(figuresProg), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O1", "-g", "-rdynamic", "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	log, reports := filepath.Join(dir, "log"), filepath.Join(dir, "reports")
	if err := os.Mkdir(reports, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := Options{Output: log, StackDepth: 8, Interval: 20 * time.Millisecond, ReportDir: reports}
	if st, err := Run(context.Background(), opts, []string{prog}); err != nil || st != 0 {
		t.Fatalf("status %d, err %v", st, err)
	}
	var pid int64
	var live, peak int64
	var snaps []logfmt.Snapshot
	var tops []logfmt.SnapshotTop
	forEach(t, log, func(l *logfmt.Line) {
		switch {
		case l.Kind == logfmt.KindMeta && string(l.Word) == logfmt.WordHeader:
			h, err := logfmt.ParseHeader(l.Rest)
			if err != nil {
				t.Fatal(err)
			}
			pid = h.PID
		case l.Kind == logfmt.KindAlloc:
			live += int64(l.Size)
			peak = max(peak, live)
		case l.Kind == logfmt.KindFree:
			live -= int64(l.Size)
		case l.Kind == logfmt.KindMeta && string(l.Word) == "snapshot":
			s, err := logfmt.ParseSnapshot(l.Rest)
			if err != nil {
				t.Fatal(err)
			}
			snaps = append(snaps, s)
			tops = nil
		case l.Kind == logfmt.KindMeta && string(l.Word) == "snapshot-top":
			s, err := logfmt.ParseSnapshotTop(l.Rest)
			if err != nil {
				t.Fatal(err)
			}
			tops = append(tops, s)
		}
	})
	if peak < 20*1000+10*5000 {
		t.Fatalf("the log's peak is %d bytes, the program's is at least 70000", peak)
	}
	if len(snaps) < 2 {
		t.Fatalf("%d snapshots in the log, want several", len(snaps))
	}
	last := snaps[len(snaps)-1]
	if last.PID != pid || int64(last.Peak) != peak || int64(last.Current) != live {
		t.Errorf("last snapshot %+v: want pid %d, peak %d, current %d (the log's lines)", last, pid, peak, live)
	}
	if len(tops) == 0 || !strings.HasPrefix(tops[0].Stack, "grow_a < main") {
		t.Errorf("last snapshot's stacks %+v: want grow_a < main first (ten blocks of it live)", tops)
	}
	txts, _ := filepath.Glob(filepath.Join(reports, "figures-"+strconv.FormatInt(pid, 10)+"_*.txt"))
	if len(txts) != 1 {
		all, _ := os.ReadDir(reports)
		t.Fatalf("report dir holds %v, want one figures-%d_*.txt", all, pid)
	}
	rep, err := os.ReadFile(txts[0])
	if err != nil {
		t.Fatal(err)
	}
	head := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(rep))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ": "); ok {
			head[k] = v
		}
	}
	if head["peak_bytes"] != strconv.FormatInt(peak, 10) || head["current_bytes"] != strconv.FormatInt(live, 10) {
		t.Errorf("report file peak_bytes=%s current_bytes=%s, the log's lines give %d and %d\n%s", head["peak_bytes"], head["current_bytes"], peak, live, rep)
	}
	if !bytes.Contains(rep, []byte("grow_b")) {
		t.Errorf("report file does not name grow_b, the peak's biggest stack:\n%s", rep)
	}
}
