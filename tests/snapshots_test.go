package tests

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
)

// snapSrc grows its heap for about half a second in many small steps and
// frees half of it at the end, without pause: under --preload the
// conversion runs behind the program, which is what made snapshots thin
// out when they were taken on memtrace's clock.
const snapSrc = `#include <stdlib.h>
#include <string.h>
#include <time.h>
static void nap(long us) { struct timespec ts = {0, us * 1000}; nanosleep(&ts, 0); }
int main(void) {
	static void *keep[2000];
	for (int i = 0; i < 2000; i++) {
		keep[i] = malloc(100 + i % 300);
		memset(keep[i], 1, 100);
		for (int j = 0; j < 20; j++) { void *volatile t = malloc(32 + j); free(t); }
		if (i % 16 == 0) nap(4000);
	}
	for (int i = 0; i < 2000; i += 2) free(keep[i]);
	nap(120000);
	return 0;
}
`

// TestSnapshotsOnLogTime: --interval's snapshots are on the log's time
// axis, on both paths: one at each multiple of the interval from the
// first until the program's last event, each with the bytes live after
// exactly the events before its time (the log's own allocations and
// frees, added up here), whether memtrace kept up with the program or
// ran behind it.
func TestSnapshotsOnLogTime(t *testing.T) {
	bin := buildC(t, "snaps", snapSrc)
	bothPaths(t, func(t *testing.T, pre []string, bpf bool) {
		log := filepath.Join(t.TempDir(), "log")
		code, _, se := memtraceRun(t, nil, append(pre, "--stack-depth", "0", "--interval", "20ms", "-o", log, "--", bin)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, se)
		}
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		if bpf {
			bpfLog(t, log)
		}
		checkSnapshotsOnLogTime(t, b, 20_000)
	})
}

func checkSnapshotsOnLogTime(t *testing.T, b []byte, everyUS uint64) {
	t.Helper()
	sc := logfmt.NewScanner(bytes.NewReader(b))
	var l logfmt.Line
	var pid int64
	live := map[uint64]uint64{}
	var bytesLive, lastEvent uint64
	firstEvent := ^uint64(0)
	var snaps []logfmt.Snapshot
	var errs []string
	for sc.Scan() {
		if l.Parse(sc.Line()) != nil {
			continue
		}
		switch {
		case l.Kind == logfmt.KindMeta && string(l.Word) == logfmt.WordHeader:
			v, _ := logfmt.Field(logfmt.Fields(l.Rest), "pid")
			fmt.Sscan(v, &pid)
		case l.Kind == logfmt.KindAlloc:
			live[l.Ptr] = l.Size
			bytesLive += l.Size
			lastEvent = max(lastEvent, l.TS)
			firstEvent = min(firstEvent, l.TS)
		case l.Kind == logfmt.KindFree:
			if sz, ok := live[l.Ptr]; ok {
				bytesLive -= sz
				delete(live, l.Ptr)
			}
			lastEvent = max(lastEvent, l.TS)
		case l.Kind == logfmt.KindMeta && string(l.Word) == logfmt.WordSnapshot:
			s, err := logfmt.ParseSnapshot(l.Rest)
			if err != nil {
				t.Fatalf("%q: %v", sc.Line(), err)
			}
			if s.PID != pid {
				continue
			}
			if s.Current != bytesLive && len(errs) < 5 {
				errs = append(errs, fmt.Sprintf("snapshot at %d µs says %d bytes live, the log's events before it add up to %d", s.TS, s.Current, bytesLive))
			}
			snaps = append(snaps, s)
		}
	}
	for _, e := range errs {
		t.Error(e)
	}
	if pid == 0 || lastEvent < 10*everyUS {
		t.Fatalf("pid %d, last event at %d µs: the program ran too short to check", pid, lastEvent)
	}
	// One at every multiple from the first after the program's first
	// allocation (before it the process has no figures) up to its last
	// event (a quiet end may add more before the exit is seen).
	k0 := firstEvent/everyUS + 1
	want := lastEvent/everyUS + 1 - k0
	if uint64(len(snaps)) < want {
		t.Errorf("%d snapshots, want one per %d µs from the first event at %d µs to the last at %d µs: %d", len(snaps), everyUS, firstEvent, lastEvent, want)
	}
	for i, s := range snaps {
		if at := (k0 + uint64(i)) * everyUS; s.TS != at {
			t.Errorf("snapshot %d is at %d µs, want %d (the first event at %d µs)", i+1, s.TS, at, firstEvent)
			break
		}
	}
}
