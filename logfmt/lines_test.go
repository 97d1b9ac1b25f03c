package logfmt

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// parseMeta reads one written line back as a reader does: the scanner's
// view of it (no newline), then Line.Parse.
func parseMeta(t *testing.T, b []byte, word string) []byte {
	t.Helper()
	if len(b) == 0 || b[len(b)-1] != '\n' || bytes.Count(b, []byte("\n")) != 1 {
		t.Fatalf("%q is not one line", b)
	}
	var l Line
	if err := l.Parse(b[:len(b)-1]); err != nil || l.Kind != KindMeta || string(l.Word) != word {
		t.Fatalf("%q: kind %v word %q err %v, want a %s line", b, l.Kind, l.Word, err, word)
	}
	return l.Rest
}

// appendValue writes v with its typed writer.
func appendValue(v any) (b []byte, word string) {
	switch v := v.(type) {
	case Header:
		return AppendHeader(nil, v), WordHeader
	case Thread:
		return AppendThread(nil, v), WordThread
	case Proc:
		return AppendProc(nil, v), WordProc
	case Lost:
		return AppendLost(nil, v), WordLost
	case Summary:
		return AppendSummary(nil, v), WordSummary
	case Snapshot:
		return AppendSnapshot(nil, v), WordSnapshot
	case SnapshotTop:
		return AppendSnapshotTop(nil, v), WordSnapshotTop
	case SnapshotFD:
		return AppendSnapshotFD(nil, v), WordSnapshotFD
	case Stack:
		return AppendStack(nil, v), WordStack
	}
	return nil, ""
}

// parseValue reads a meta line's fields with the typed parser of its word;
// ok is false for a word without one.
func parseValue(word string, rest []byte) (v any, ok bool, err error) {
	switch word {
	case WordHeader:
		v, err = ParseHeader(rest)
	case WordThread:
		v, err = ParseThread(rest)
	case WordProc:
		v, err = ParseProc(rest)
	case WordLost:
		v, err = ParseLost(rest)
	case WordSummary:
		v, err = ParseSummary(rest)
	case WordSnapshot:
		v, err = ParseSnapshot(rest)
	case WordSnapshotTop:
		v, err = ParseSnapshotTop(rest)
	case WordSnapshotFD:
		v, err = ParseSnapshotFD(rest)
	case WordStack:
		v, err = ParseStack(rest)
	default:
		return nil, false, nil
	}
	return v, true, err
}

// roundTrip writes v with its writer and reads it back with its parser.
// A header's start comes back in UTC: the same instant counts as equal.
func roundTrip(t *testing.T, v any) (line []byte, back any) {
	t.Helper()
	line, word := appendValue(v)
	if word == "" {
		t.Fatalf("no writer for %T", v)
	}
	back, _, err := parseValue(word, parseMeta(t, line, word))
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	if h, ok := back.(Header); ok && h.Start.Equal(v.(Header).Start) {
		h.Start = v.(Header).Start
		back = h
	}
	return line, back
}

var start = time.Date(2025, 3, 1, 9, 30, 0, 123456789, time.UTC)

// The layouts memtrace wrote before the typed writers (agent, run.go,
// convert.go, fdtrace): the writers keep them byte for byte, except the
// preload header (one key order and one start= format now), the lost
// line's ts= (the preload path had none), and exec/untraced, whose ts=
// moved next to pid=.
func TestLinesLayout(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{Header{Version: "0.1.0", PID: 12, PIDs: []int64{12, 13}, Comm: "app", Cmd: `./app -x "y"`, Start: start,
			Mode: ModeBPF, Probes: "uprobe_session", Singlestep: []string{"malloc", "free"}},
			`header version=0.1.0 pid=12 pids=12,13 comm=app cmd="./app -x \"y\"" start=2025-03-01T09:30:00.123456789Z mode=bpf probes=uprobe_session singlestep=malloc,free`},
		{Header{Version: "0.1.0", PID: 7, Comm: "a b", Cmd: "", Start: time.Date(2025, 3, 1, 10, 30, 0, 0, time.FixedZone("CET", 3600)), Mode: ModePreload},
			`header version=0.1.0 pid=7 comm="a b" cmd="" start=2025-03-01T09:30:00Z mode=preload`},
		{Header{Version: "0.1.0", PID: 8, Comm: "redis-server", Cmd: "/usr/bin/redis-server", Exe: "/usr/bin/redis-check-rdb", Mode: ModeBPF},
			`header version=0.1.0 pid=8 comm=redis-server cmd=/usr/bin/redis-server exe=/usr/bin/redis-check-rdb mode=bpf`},
		{Header{Version: "genlog", PID: 4242, Comm: "app", Cmd: "./app --bench", Mode: "synthetic"},
			`header version=genlog pid=4242 comm=app cmd="./app --bench" mode=synthetic`},
		{Thread{TID: 13, PID: 12, Name: "worker 1"}, `thread tid=13 pid=12 name="worker 1"`},
		{Thread{TID: 13, PID: 12, Name: ""}, `thread tid=13 pid=12 name=""`},
		{Proc{Event: ProcFork, PID: 14, PPID: 12, TS: 99}, `proc event=fork pid=14 ppid=12 ts=99`},
		{Proc{Event: ProcExec, PID: 14, PPID: 12, TS: 99, Comm: "sh", Cmd: "sh -c x"}, `proc event=exec pid=14 ppid=12 ts=99 comm=sh cmd="sh -c x"`},
		{Proc{Event: ProcExec, PID: 14, TS: 99, Comm: "sh"}, `proc event=exec pid=14 ts=99 comm=sh`},
		{Proc{Event: ProcExit, PID: 14, TS: 100}, `proc event=exit pid=14 ts=100`},
		{Proc{Event: ProcExit, PID: 14, TS: 100, HasStatus: true}, `proc event=exit pid=14 ts=100 status=0`},
		{Proc{Event: ProcExit, PID: 14, TS: 100, HasStatus: true, Status: 3}, `proc event=exit pid=14 ts=100 status=3`},
		{Proc{Event: ProcExit, PID: 14, TS: 100, Signal: "SIGSEGV"}, `proc event=exit pid=14 ts=100 signal=SIGSEGV`},
		{Proc{Event: ProcAttach, PID: 14, TS: 5, Comm: "app", Cmd: "./app"}, `proc event=attach pid=14 comm=app cmd=./app`},
		{Proc{Event: ProcUntraced, PID: 15, TS: 7, Reason: "too many open files"}, `proc event=untraced pid=15 ts=7 reason="too many open files"`},
		{Lost{Count: 3, Total: 10, TS: 55}, `lost count=3 total=10 ts=55`},
		{Summary{Events: 9, Allocs: 4, Frees: 3, Lost: 0, DurationUS: 1234}, `summary events=9 allocs=4 frees=3 lost=0 duration_us=1234`},
		{Snapshot{PID: 12, TS: 1, Current: 2, Peak: 3, PeakTS: 4, Blocks: 5, FDs: 6}, `snapshot pid=12 ts=1 current=2 peak=3 peak_ts=4 blocks=5 fds=6`},
		{SnapshotTop{PID: 12, Rank: 1, Bytes: 4096, Blocks: 2, Stack: "f < main"}, `snapshot-top pid=12 rank=1 bytes=4096 blocks=2 stack="f < main"`},
		{SnapshotFD{PID: 12, FD: 3, Kind: "file", Call: "openat", Path: ""}, `snapshot-fd pid=12 fd=3 kind=file call=openat path=""`},
		{Stack{Truncated: true, Reason: "fp"}, `stack truncated=1 reason=fp`},
		{Stack{Missing: true}, `stack missing=1`},
	}
	for _, c := range cases {
		line, back := roundTrip(t, c.v)
		if got := strings.TrimSuffix(strings.TrimPrefix(string(line), TracePrefix), "\n"); got != c.want {
			t.Errorf("%T\n got %q\nwant %q", c.v, got, c.want)
		}
		want := c.v
		if p, ok := want.(Proc); ok && p.Event == ProcAttach {
			p.TS = 0 // an attach line has no ts=
			want = p
		}
		if !reflect.DeepEqual(back, want) {
			t.Errorf("%s\nread back %+v\nwant      %+v", line, back, want)
		}
	}
	if got, want := string(AppendStackTruncated(nil, "depth")), string(AppendStack(nil, Stack{Truncated: true, Reason: "depth"})); got != want {
		t.Errorf("AppendStackTruncated: %q, want %q", got, want)
	}
	if got := string(AppendStackMissing(nil)); got != TracePrefix+"stack missing=1\n" {
		t.Errorf("AppendStackMissing: %q", got)
	}
}

// start= is one format whatever the clock gives: UTC, the nanoseconds
// without trailing zeros, no fraction at all on a whole second.
func TestHeaderStartFormat(t *testing.T) {
	for _, c := range []struct {
		t    time.Time
		want string
	}{
		{start, "2025-03-01T09:30:00.123456789Z"},
		{time.Date(2025, 3, 1, 9, 30, 0, 120000000, time.UTC), "2025-03-01T09:30:00.12Z"},
		{time.Date(2025, 3, 1, 9, 30, 0, 1000, time.UTC), "2025-03-01T09:30:00.000001Z"},
		{time.Date(2025, 3, 1, 9, 30, 0, 0, time.UTC), "2025-03-01T09:30:00Z"},
		{time.Date(2025, 3, 1, 1, 0, 0, 5, time.FixedZone("X", -8*3600)), "2025-03-01T09:00:00.000000005Z"},
		{time.Unix(0, 0), "1970-01-01T00:00:00Z"},
	} {
		b := AppendHeader(nil, Header{Start: c.t})
		if !bytes.Contains(b, []byte(" start="+c.want+" ")) {
			t.Errorf("%v: %q, want start=%s", c.t, b, c.want)
		}
		h, err := ParseHeader(parseMeta(t, b, WordHeader))
		if err != nil || !h.Start.Equal(c.t) || h.Start.Location() != time.UTC {
			t.Errorf("%q read back as %v (%v), want %v in UTC", b, h.Start, err, c.t)
		}
	}
}

// Values that do not parse are ErrMalformed, and the error never shows the
// value (it comes from a file).
func TestParseLinesErrors(t *testing.T) {
	const secret = "s3cr3t"
	for _, c := range []struct {
		name  string
		parse func([]byte) error
		rest  string
	}{
		{"header pid", func(b []byte) error { _, err := ParseHeader(b); return err }, "pid=" + secret},
		{"header pids", func(b []byte) error { _, err := ParseHeader(b); return err }, "pids=1," + secret},
		{"header start", func(b []byte) error { _, err := ParseHeader(b); return err }, "start=" + secret},
		{"thread tid", func(b []byte) error { _, err := ParseThread(b); return err }, "tid=" + secret + " pid=1"},
		{"proc ts", func(b []byte) error { _, err := ParseProc(b); return err }, "event=exit pid=1 ts=-1" + secret},
		{"proc status", func(b []byte) error { _, err := ParseProc(b); return err }, "event=exit pid=1 ts=1 status=" + secret},
		{"proc status range", func(b []byte) error { _, err := ParseProc(b); return err }, "event=exit pid=1 ts=1 status=256"},
		{"lost count", func(b []byte) error { _, err := ParseLost(b); return err }, "count=" + secret},
		{"summary duration", func(b []byte) error { _, err := ParseSummary(b); return err }, "duration_us=1" + secret},
		{"snapshot peak", func(b []byte) error { _, err := ParseSnapshot(b); return err }, "peak=99999999999999999999" + secret},
		{"snapshot-top rank", func(b []byte) error { _, err := ParseSnapshotTop(b); return err }, "rank=" + secret},
		{"snapshot-fd fd", func(b []byte) error { _, err := ParseSnapshotFD(b); return err }, "fd=" + secret},
	} {
		err := c.parse([]byte(c.rest))
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", c.name, err)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error shows the value: %v", c.name, err)
		}
	}
	// Keys a later version adds, and absent ones, are no error.
	if l, err := ParseLost([]byte("count=2 future=x")); err != nil || l != (Lost{Count: 2}) {
		t.Errorf("lost with an unknown key: %+v %v", l, err)
	}
}

// fuzzValues builds one value of every line type from the fuzzer's
// arguments.
func fuzzValues(s1, s2, s3 string, a, b, c int64, u1, u2, u3 uint64) []any {
	var pids []int64
	for i, p := range []int64{a, b, c}[:u1%4] {
		pids = append(pids, p+int64(i))
	}
	var st time.Time
	if u2%5 != 0 {
		st = time.Unix(0, b)
	}
	var single []string
	if u3%3 != 0 {
		single = strings.Split(s3, ",")
	}
	p := Proc{Event: s1, PID: a, PPID: b, TS: u1, Comm: s2, Cmd: s3, Reason: s2 + s1}
	if p.Event == ProcAttach {
		p.TS = 0
	}
	switch u3 % 3 {
	case 1:
		p.HasStatus, p.Status = true, int(u2%256)
	case 2:
		if p.Signal = s3; p.Signal == "" {
			p.Signal = "SIGSEGV"
		}
	}
	stk := Stack{Truncated: u1&1 != 0, Missing: u1&2 != 0}
	if stk.Truncated {
		stk.Reason = s1
	}
	return []any{
		Header{Version: s1, PID: a, PIDs: pids, Comm: s2, Cmd: s3, Start: st, Mode: s1 + s3, Probes: s2, Singlestep: single},
		Thread{TID: a, PID: b, Name: s1},
		p,
		Proc{Event: ProcAttach, PID: c, Comm: s3},
		Lost{Count: u1, Total: u2, TS: u3},
		Summary{Events: u1, Allocs: u2, Frees: u3, Lost: u1 ^ u3, DurationUS: c},
		Snapshot{PID: a, TS: u1, Current: u2, Peak: u3, PeakTS: u1 + 1, Blocks: u2 / 2, FDs: u3 / 3},
		SnapshotTop{PID: a, Rank: b, Bytes: u1, Blocks: u2, Stack: s1},
		SnapshotFD{PID: a, FD: c, Kind: s1, Call: s2, Path: s3},
		stk,
	}
}

// FuzzLinesRoundTrip: any field values (spaces, quotes, newlines, bytes
// that are not UTF-8, any number) come back the same through the log.
func FuzzLinesRoundTrip(f *testing.F) {
	f.Add("0.1.0", "app", "./app -x", int64(12), int64(1740821400123456789), int64(3), uint64(2), uint64(1), uint64(1))
	f.Add("", "a \"b\"\n", "x=y,z", int64(-1), int64(-5), int64(0), uint64(0), uint64(5), uint64(0))
	f.Add("attach", "\xff\x00", `\`, int64(1<<62), int64(0), int64(-1<<63), uint64(1<<64-1), uint64(3), uint64(7))
	f.Add("exec", "", ",", int64(0), int64(1), int64(2), uint64(3), uint64(4), uint64(5))
	f.Fuzz(func(t *testing.T, s1, s2, s3 string, a, b, c int64, u1, u2, u3 uint64) {
		for _, v := range fuzzValues(s1, s2, s3, a, b, c, u1, u2, u3) {
			line, back := roundTrip(t, v)
			if !reflect.DeepEqual(back, v) {
				t.Fatalf("%q\nread back %#v\nwritten   %#v", line, back, v)
			}
		}
	})
}

// FuzzParseLines: any line the typed parsers accept writes back to a line
// that parses to the same value.
func FuzzParseLines(f *testing.F) {
	for _, v := range fuzzValues("x", "a b", "c,d", 1, 2, 3, 4, 5, 6) {
		line, _ := appendValue(v)
		f.Add(line[:len(line)-1])
	}
	f.Add([]byte(`[memtrace] header pids=1,,2 start=2025-03-01T09:30:00+01:00 singlestep=`))
	f.Add([]byte(`[memtrace] header start=9999-12-31T23:00:00-05:00`))
	f.Add([]byte(`[memtrace] proc event=attach pid=1 ts=9 ppid=0`))
	f.Add([]byte(`[memtrace] stack truncated=0 reason=x missing=1`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var l Line
		if l.Parse(in) != nil || l.Kind != KindMeta {
			return
		}
		v, ok, err := parseValue(string(l.Word), l.Rest)
		if !ok || err != nil {
			return
		}
		// What the layout leaves out does not come back: normalize.
		switch x := v.(type) {
		case Proc:
			if x.Event == ProcAttach {
				x.TS = 0
			}
			v = x
		case Stack:
			if !x.Truncated {
				x.Reason = ""
			}
			v = x
		}
		line, back := roundTrip(t, v)
		if !reflect.DeepEqual(back, v) {
			t.Fatalf("%q -> %q\nread back %#v\nwant      %#v", in, line, back, v)
		}
	})
}
