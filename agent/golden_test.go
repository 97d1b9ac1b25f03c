package agent

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/logfmt"
)

var update = flag.Bool("update", false, "rewrite the golden logs in testdata")

// goldenRun feeds one fixed, varied stream of events through a Session:
// threads with short, long and unprintable names, a rename, every op,
// numbers of every width, stacks kernel-side and named, missing and cut
// ones, frees of unknown blocks, thread and process exits.
func goldenRun(t *testing.T, inProcess, noFreeStacks bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	s := New(Config{Out: &buf, StartNS: 1000, StackDepth: 6, InProcess: inProcess, NoFreeStacks: noFreeStacks})
	s.AddProcess(1, false)
	s.procs[1].scanned = true
	r := rand.New(rand.NewPCG(23, 5))
	const nStacks = 40
	for id := uint64(1); id <= nStacks; id++ {
		n := 1 + r.IntN(8)
		if inProcess {
			fr := make([]Frame, n)
			for j := range fr {
				fr[j] = Frame{Module: []string{"/usr/bin/sqlite3", "/lib/libc.so.6", "", "/odd\npath.so"}[r.IntN(4)],
					Symbol: []string{"", "main", "sqlite3Malloc", "_ZN3foo3barEv", "bad\rname"}[r.IntN(5)],
					Offset: r.Uint64N(1 << uint(4+r.IntN(30))), Addr: r.Uint64()}
			}
			s.ResolvedStack(id, fr)
			continue
		}
		// Anonymous memory (ino 0): named by address alone, without
		// /proc; the stop reasons mark some as cut.
		fr := make([]event.Frame, n)
		for j := range fr {
			fr[j] = event.Frame{Addr: 0x7f0000000000 + r.Uint64N(1<<30)}
		}
		stop := []event.StopReason{event.StopEnd, event.StopDepth, event.StopNoInfo, event.StopBadRead}[r.IntN(4)]
		s.Stack(&event.Stack{ID: id, TGID: 1, Stop: stop, Frames: fr})
	}
	names := []string{"sqlite3", "a-thread-name-longer-than-15", "tab\there", "w\x7f", ""}
	var live []uint64
	ts := uint64(1000)
	for i := 0; i < 600; i++ {
		ts += r.Uint64N(1 << uint(r.IntN(40)))
		tid := uint32(1 + r.IntN(4))
		name := names[int(tid)%len(names)]
		if tid == 2 && i > 300 {
			name = "renamed"
		}
		stack := uint64(0)
		if r.IntN(5) > 0 {
			stack = uint64(1 + r.IntN(nStacks+3)) // a few ids never sent
		}
		var e *event.Event
		switch k := r.IntN(10); {
		case k < 5 || len(live) == 0:
			op := logfmt.Op(1 + r.IntN(int(logfmt.OpMiReallocAligned)))
			if op == logfmt.OpFree || op == logfmt.OpMunmap || op == logfmt.OpDelete || op == logfmt.OpDeleteArr {
				op = logfmt.OpMalloc
			}
			ptr := r.Uint64() &^ 7
			e = ev(ts, tid, event.KindAlloc, op, ptr, r.Uint64N(1<<uint(r.IntN(48))), name)
			live = append(live, ptr)
		case k < 8:
			j := r.IntN(len(live))
			e = ev(ts, tid, event.KindFree, []logfmt.Op{logfmt.OpFree, logfmt.OpDelete, logfmt.OpTcFree}[r.IntN(3)], live[j], 0, name)
			live = append(live[:j], live[j+1:]...)
		case k < 9:
			// A realloc, as both captures send it: the old block's
			// free, then the new block.
			j := r.IntN(len(live))
			e = ev(ts, tid, event.KindAlloc, logfmt.OpRealloc, r.Uint64()&^7, r.Uint64N(1<<20), name)
			f := ev(ts, tid, event.KindFree, logfmt.OpFree, live[j], 1, name)
			f.Stack = stack
			s.Add(f)
			live[j] = e.Ptr
		default:
			// A free of a block never seen.
			e = ev(ts, tid, event.KindFree, logfmt.OpFree, r.Uint64(), 0, name)
		}
		e.Stack = stack
		s.Add(e)
		if i%97 == 0 {
			s.Add(ev(ts+1, 3, event.KindExit, 0, 0, 0, names[3]))
		}
		if i%50 == 0 {
			s.Drain(true)
		}
	}
	s.Add(ev(ts+2, 1, event.KindExit, 0, 0, 0, names[1]))
	s.Drain(true)
	s.Summary(12345)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSessionGolden: the log a Session writes for a fixed stream of events
// is byte for byte the one the agent wrote before its per-event path was
// made cheaper (testdata, written with -update by that code): speed-ups
// must not change one byte.
func TestSessionGolden(t *testing.T) {
	for _, c := range []struct {
		file                    string
		inProcess, noFreeStacks bool
	}{
		{"golden-kernel.log", false, false},
		{"golden-inprocess.log", true, false},
		{"golden-nofreestacks.log", false, true},
	} {
		got := goldenRun(t, c.inProcess, c.noFreeStacks)
		path := filepath.Join("testdata", c.file)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -run TestSessionGolden -update on the old code)", err)
		}
		if !bytes.Equal(got, want) {
			gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
			for i := 0; i < min(len(gl), len(wl)); i++ {
				if !bytes.Equal(gl[i], wl[i]) {
					t.Fatalf("%s: line %d differs:\ngot  %q\nwant %q", c.file, i+1, gl[i], wl[i])
				}
			}
			t.Fatalf("%s: %d lines, want %d", c.file, len(gl), len(wl))
		}
	}
}
