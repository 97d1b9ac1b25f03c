package procreport

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/asuser/asusertest"
)

func TestWriteReadAggregate(t *testing.T) {
	dir := t.TempDir()
	end := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	a := &Report{Process: "svc a/b", PID: 10, End: end, AllocCalls: 5, AllocBytes: 500, Current: 100, Peak: 300,
		LeakBlocks: 1, Leaks: []Entry{{Bytes: 100, Blocks: 1, Stack: "f < main"}}, OpenFDs: []FD{{FD: 3, Kind: "file", Call: "openat", Path: "/x"}}}
	b := &Report{Process: "worker", PID: 11, End: end, AllocCalls: 7, AllocBytes: 700, Current: 0, Peak: 700}
	stems := map[*Report]string{a: "svc_a_b-10_20261129T120000.000Z", b: "worker-11_20261129T120000.000Z"}
	for _, r := range []*Report{a, b} {
		txt, htm, err := Write(dir, r)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(txt) != stems[r]+".txt" {
			t.Errorf("file name %s", txt)
		}
		if h, _ := os.ReadFile(htm); !strings.Contains(string(h), "<table>") {
			t.Errorf("html %s has no table", htm)
		}
		s, err := Read(txt)
		if err != nil || s.PID != r.PID || s.Peak != r.Peak || s.Current != r.Current || s.AllocCalls != r.AllocCalls || s.OpenFDs != uint64(len(r.OpenFDs)) {
			t.Fatalf("read back %+v (%v) from %+v", s, err, r)
		}
	}
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a report\n"), 0o644)
	sums, skipped, err := Aggregate(dir, "summary")
	if err != nil || len(sums) != 2 || len(skipped) != 1 || skipped[0] != "notes.txt" {
		t.Fatalf("aggregate: %d sums, skipped %v, %v", len(sums), skipped, err)
	}
	if sums[0].Process != "worker" { // highest peak first
		t.Errorf("order: %+v", sums)
	}
	out, _ := os.ReadFile(filepath.Join(dir, "summary.txt"))
	if !strings.Contains(string(out), "2 processes: 12 allocation calls") || !strings.Contains(string(out), "1 fds left open") {
		t.Errorf("summary:\n%s", out)
	}
	// Aggregating again does not read its own summary.
	if sums, _, err := Aggregate(dir, "summary"); err != nil || len(sums) != 2 {
		t.Errorf("second aggregate: %d, %v", len(sums), err)
	}
	if _, _, err := Aggregate(t.TempDir(), "summary"); !errors.Is(err, ErrNoReports) {
		t.Errorf("empty dir: %v", err)
	}
}

// TestWriteRefusesPlantedLinks: as root, a link another user planted at a
// report's name, or at the summary's, is not written through; the file it
// points at is left alone.
func TestWriteRefusesPlantedLinks(t *testing.T) {
	asusertest.NeedRoot(t)
	t.Setenv("SUDO_UID", "")
	dir := asusertest.Dir(t)
	r := &Report{Process: "svc", PID: 10, End: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), Peak: 1}
	for _, ext := range []string{".txt", ".html"} {
		link := filepath.Join(dir, r.Name()+ext)
		victim := asusertest.PlantAt(t, link)
		if _, _, err := Write(dir, r); err == nil || !strings.Contains(err.Error(), link) {
			t.Errorf("report through the planted %s: %v", link, err)
		}
		asusertest.Untouched(t, link, victim)
		os.Remove(link)
		os.Remove(filepath.Join(dir, r.Name()+".txt"))
	}
	if _, _, err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "summary.txt")
	victim := asusertest.PlantAt(t, link)
	if _, _, err := Aggregate(dir, "summary"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("summary through the planted link: %v", err)
	}
	asusertest.Untouched(t, link, victim)
}
