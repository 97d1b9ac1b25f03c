package preload

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/runner"
)

// The converter's header is logfmt's one layout: written again from what
// it parses to, it is the same bytes; start= is this run's wall-clock
// time (UTC, nanoseconds), mode=preload, and the pid is the program's.
func TestConvertHeaderLayout(t *testing.T) {
	lib, prog := build(t)
	t.Setenv(LibEnv, lib)
	log := filepath.Join(t.TempDir(), "log")
	before := time.Now()
	if st, err := Run(context.Background(), Options{Output: runner.ParseOutput(log)}, []string{prog, "fmt"}); err != nil || st != 0 {
		t.Fatalf("status %d, err %v", st, err)
	}
	after := time.Now()
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := bytes.Cut(data, []byte("\n"))
	var l logfmt.Line
	if err := l.Parse(first); err != nil || string(l.Word) != logfmt.WordHeader {
		t.Fatalf("first line %q is not a header (%v)", first, err)
	}
	h, err := logfmt.ParseHeader(l.Rest)
	if err != nil {
		t.Fatalf("%q: %v", first, err)
	}
	if again := logfmt.AppendHeader(nil, h); string(again) != string(first)+"\n" {
		t.Errorf("header not in logfmt's layout\nconverter: %q\nlogfmt:    %q", first, again)
	}
	if h.Mode != logfmt.ModePreload || h.PID <= 0 || !strings.Contains(h.Cmd, "fmt") || h.Comm == "" {
		t.Errorf("header fields: %+v", h)
	}
	// The library stamps the start before the program runs; allow the
	// clocks' granularity either side.
	if h.Start.Before(before.Add(-time.Second)) || h.Start.After(after) || h.Start.Location() != time.UTC {
		t.Errorf("start=%v, want between %v and %v, in UTC", h.Start, before, after)
	}
}

// A lost line from the converter carries ts=, the time of the latest
// record written before it, so readers can place it like the eBPF path's.
func TestConvertLostLineHasTS(t *testing.T) {
	lib, prog := build(t)
	cmd := exec.Command(prog, "spam")
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
	data := runRegion(t, 4*chunkSize, cmd, false, nil)
	sc := logfmt.NewScanner(bytes.NewReader(data))
	var l logfmt.Line
	var lastTS, maxTS uint64
	var lost []logfmt.Lost
	var before []uint64 // the latest event time before each lost line
	for sc.Scan() {
		if err := l.Parse(sc.Line()); err != nil {
			t.Fatalf("%q: %v", sc.Line(), err)
		}
		switch {
		case l.Kind == logfmt.KindAlloc || l.Kind == logfmt.KindFree || l.Kind == logfmt.KindExit:
			lastTS = max(lastTS, l.TS)
		case l.Kind == logfmt.KindMeta && string(l.Word) == logfmt.WordLost:
			if !bytes.Contains(l.Rest, []byte(" ts=")) {
				t.Fatalf("lost line without ts=: %q", sc.Line())
			}
			x, err := logfmt.ParseLost(l.Rest)
			if err != nil {
				t.Fatalf("%q: %v", sc.Line(), err)
			}
			if again := logfmt.AppendLost(nil, x); string(again) != string(sc.Line())+"\n" {
				t.Errorf("lost line not in logfmt's layout: %q", sc.Line())
			}
			if x.Count == 0 || x.Total < x.Count {
				t.Errorf("lost line %q: want count > 0 and total >= count", sc.Line())
			}
			lost, before = append(lost, x), append(before, lastTS)
		}
	}
	maxTS = lastTS
	if len(lost) == 0 {
		t.Fatal("no lost line: the region was meant to overflow")
	}
	// Records that make no line (a thread's name) may be later than the
	// last line before it, never later than the log's end.
	for i, x := range lost {
		if x.TS < before[i] || x.TS > maxTS {
			t.Errorf("lost line %d: ts=%d, want between %d (the events before it) and %d (the last event)", i, x.TS, before[i], maxTS)
		}
	}
}
