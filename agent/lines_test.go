package agent

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/logfmt"
)

// The session's [memtrace] lines (stack lines too), read back with
// logfmt's typed parsers: each carries exactly what the events said, in
// logfmt's layout.
func TestSessionMetaLines(t *testing.T) {
	var buf bytes.Buffer
	const start = 1_000_000_000
	s := New(Config{Out: &buf, StartNS: start})
	s.AddProcess(1, false)
	s.procs[1].scanned = true
	at := func(us uint64) uint64 { return start + us*1000 }
	fork := ev(at(10), 1, event.KindFork, 0, 7, 0, "main")
	exec := ev(at(20), 7, event.KindExec, 0, 0, 0, "child prog")
	exec.TGID = 7
	exit := ev(at(40), 7, event.KindExit, 0, 0, 0, "child prog")
	exit.TGID = 7
	alloc := ev(at(30), 7, event.KindAlloc, logfmt.OpMalloc, 0x10, 64, "child prog")
	alloc.TGID = 7
	// A stack cut at --stack-depth, and one the tracer never sent.
	s.Stack(&event.Stack{ID: 5, TGID: 7, Stop: event.StopDepth, Frames: []event.Frame{{Addr: 0x1000}}})
	alloc.Stack = 5
	free := ev(at(35), 7, event.KindFree, logfmt.OpFree, 0x10, 0, "child prog")
	free.TGID, free.Stack = 7, 6
	for _, e := range []*event.Event{ev(at(5), 1, event.KindAlloc, logfmt.OpMalloc, 0x20, 8, "main"), fork, exec, alloc, free, exit} {
		s.Add(e)
	}
	s.Drain(true)
	s.Lost(3, at(50))
	s.Lost(2, at(60))
	s.Flush()

	var got []any
	sc := logfmt.NewScanner(bytes.NewReader(buf.Bytes()))
	var l logfmt.Line
	for sc.Scan() {
		if err := l.Parse(sc.Line()); err != nil {
			t.Fatalf("%q: %v", sc.Line(), err)
		}
		if l.Kind != logfmt.KindMeta {
			continue
		}
		var v any
		var err error
		var again []byte
		switch string(l.Word) {
		case logfmt.WordThread:
			v, again, err = roundTrip(l.Rest, logfmt.ParseThread, logfmt.AppendThread)
		case logfmt.WordProc:
			v, again, err = roundTrip(l.Rest, logfmt.ParseProc, logfmt.AppendProc)
		case logfmt.WordLost:
			v, again, err = roundTrip(l.Rest, logfmt.ParseLost, logfmt.AppendLost)
		case logfmt.WordStack:
			v, again, err = roundTrip(l.Rest, logfmt.ParseStack, logfmt.AppendStack)
		default:
			t.Fatalf("unexpected line %q", sc.Line())
		}
		if err != nil {
			t.Fatalf("%q: %v", sc.Line(), err)
		}
		if string(again) != string(sc.Line())+"\n" {
			t.Errorf("not in logfmt's layout: %q, logfmt writes %q", sc.Line(), again)
		}
		got = append(got, v)
	}
	want := []any{
		logfmt.Thread{TID: 1, PID: 1, Name: "main"},
		logfmt.Proc{Event: logfmt.ProcFork, PID: 7, PPID: 1, TS: 10},
		logfmt.Proc{Event: logfmt.ProcExec, PID: 7, TS: 20, Comm: "child prog"},
		logfmt.Thread{TID: 7, PID: 7, Name: "child prog"},
		logfmt.Stack{Truncated: true, Reason: "depth"},
		logfmt.Stack{Missing: true},
		logfmt.Proc{Event: logfmt.ProcExit, PID: 7, TS: 40},
		logfmt.Lost{Count: 3, Total: 3, TS: 50},
		logfmt.Lost{Count: 2, Total: 5, TS: 60},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v\n%s", got, want, buf.String())
	}
	if s.Stats.StacksMissing != 1 {
		t.Errorf("Stats.StacksMissing=%d, want 1", s.Stats.StacksMissing)
	}
}

// roundTrip parses a line's fields with its typed parser and writes them
// again with its typed writer.
func roundTrip[T any](rest []byte, parse func([]byte) (T, error), write func([]byte, T) []byte) (any, []byte, error) {
	x, err := parse(rest)
	return x, write(nil, x), err
}
