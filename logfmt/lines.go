package logfmt

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Every [memtrace] line memtrace writes has a typed writer here, next to a
// parser that reads it back, so that the layout of a line (its keys, their
// order, which are left out when empty) is decided in one place. Writers
// append one whole line with its newline and allocate nothing beyond b;
// parsers ignore keys they do not know (later versions may add some) and
// leave absent ones at their zero value.

// Values of mode= on the header line.
const (
	ModeBPF     = "bpf"     // the eBPF tracer
	ModePreload = "preload" // the LD_PRELOAD library
)

// StartLayout is the one format of the header's start=: RFC 3339 in UTC
// with the nanoseconds (trailing zeros dropped, as time.RFC3339Nano does),
// e.g. 2025-03-01T09:30:00.123456789Z.
const StartLayout = time.RFC3339Nano

// Header is the first [memtrace] line of a session:
// "header version= pid= [pids=] comm= cmd= [exe=] [start=] mode= [probes=] [singlestep=]".
type Header struct {
	Version string
	PID     int64   // the process the log is about (the first one given)
	PIDs    []int64 // every process given to -p; left out when empty
	Comm    string  // the name the process was started by (the kernel's comm)
	Cmd     string
	// Exe is the program's real file, which the stacks name, when the
	// process was started through a link of another name (Debian's
	// redis-server, a link to redis-check-rdb); left out otherwise.
	Exe string
	// Start is the wall-clock time tracing started (written in UTC in
	// StartLayout, so within the years 0-9999); left out when zero.
	Start  time.Time
	Mode   string // ModeBPF, ModePreload
	Probes string // uprobe_session, uprobe_multi or uprobe; left out when empty
	// Singlestep names the hot functions probed on an instruction the
	// kernel single-steps (comma-separated, so no name may hold a comma);
	// left out when empty.
	Singlestep []string
}

// AppendHeader appends h's line to b.
func AppendHeader(b []byte, h Header) []byte {
	b = appendWord(b, WordHeader)
	b = appendStr(b, "version", h.Version)
	b = appendInt(b, "pid", h.PID)
	if len(h.PIDs) > 0 {
		b = append(b, " pids="...)
		for i, p := range h.PIDs {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, p, 10)
		}
	}
	b = appendStr(b, "comm", h.Comm)
	b = appendStr(b, "cmd", h.Cmd)
	if h.Exe != "" {
		b = appendStr(b, "exe", h.Exe)
	}
	if !h.Start.IsZero() {
		// The layout has no byte that needs quoting.
		b = append(b, " start="...)
		b = h.Start.UTC().AppendFormat(b, StartLayout)
	}
	b = appendStr(b, "mode", h.Mode)
	if h.Probes != "" {
		b = appendStr(b, "probes", h.Probes)
	}
	if len(h.Singlestep) > 0 {
		b = appendStr(b, "singlestep", strings.Join(h.Singlestep, ","))
	}
	return append(b, '\n')
}

// ParseHeader reads the fields of a header line (Line.Rest).
func ParseHeader(rest []byte) (Header, error) {
	var h Header
	fr := fieldReader{word: WordHeader}
	for _, kv := range Fields(rest) {
		switch kv.Key {
		case "version":
			h.Version = kv.Value
		case "pid":
			h.PID = fr.int(kv)
		case "pids":
			for _, p := range strings.Split(kv.Value, ",") {
				h.PIDs = append(h.PIDs, fr.int(KV{kv.Key, p}))
			}
		case "comm":
			h.Comm = kv.Value
		case "cmd":
			h.Cmd = kv.Value
		case "exe":
			h.Exe = kv.Value
		case "start":
			// A time whose UTC year is not four digits could not be
			// written back in the layout.
			t, err := time.Parse(StartLayout, kv.Value)
			if y := t.UTC().Year(); err != nil || y < 0 || y > 9999 {
				fr.bad(kv.Key, "an RFC 3339 time")
				t = time.Time{}
			}
			h.Start = t
		case "mode":
			h.Mode = kv.Value
		case "probes":
			h.Probes = kv.Value
		case "singlestep":
			h.Singlestep = strings.Split(kv.Value, ",")
		}
	}
	return h, fr.err
}

// Thread is a "thread tid= pid= name=" line: a thread's first event, and
// again after a rename.
type Thread struct {
	TID, PID int64
	Name     string
}

// AppendThread appends t's line to b.
func AppendThread(b []byte, t Thread) []byte {
	b = appendWord(b, WordThread)
	b = appendInt(b, "tid", t.TID)
	b = appendInt(b, "pid", t.PID)
	b = appendStr(b, "name", t.Name)
	return append(b, '\n')
}

// ParseThread reads the fields of a thread line.
func ParseThread(rest []byte) (Thread, error) {
	var t Thread
	fr := fieldReader{word: WordThread}
	for _, kv := range Fields(rest) {
		switch kv.Key {
		case "tid":
			t.TID = fr.int(kv)
		case "pid":
			t.PID = fr.int(kv)
		case "name":
			t.Name = kv.Value
		}
	}
	return t, fr.err
}

// Values of event= on proc lines.
const (
	ProcFork     = "fork"     // pid= is the child, ppid= the traced parent
	ProcExec     = "exec"     // a new image: its heap starts empty
	ProcExit     = "exit"     // the whole process is gone
	ProcAttach   = "attach"   // a process given to -p (no ts=: it ran before tracing)
	ProcUntraced = "untraced" // memtrace could not probe it, or was not asked to (reason=)
)

// ReasonNotFollowed is the reason of a ProcUntraced line for a child of a
// traced process when memtrace was not asked to follow children: the
// log leaves its allocations out by request, and says so.
const ReasonNotFollowed = "not followed (--follow traces a program's children)"

// Proc is a process line:
// "proc event= pid= [ppid=] [ts=] [comm=] [cmd=] [reason=] [status=|signal=]".
type Proc struct {
	Event string
	PID   int64
	PPID  int64  // the parent; left out when 0 (no traced process has parent 0)
	TS    uint64 // microseconds since tracing started; not on ProcAttach lines
	Comm  string // left out when empty, as are Cmd and Reason
	Cmd   string
	// Reason says why a process is untraced (ReasonNotFollowed, or
	// what failed).
	Reason string
	// How an exit ended, when the tracer knows (the launched program's
	// wait status): HasStatus with its exit code Status, or Signal, the
	// signal that killed it ("SIGSEGV"). Neither: not known (an attached
	// process, or a log from before they were written).
	HasStatus bool
	Status    int
	Signal    string
}

// AppendProc appends p's line to b.
func AppendProc(b []byte, p Proc) []byte {
	b = appendWord(b, WordProc)
	b = appendStr(b, "event", p.Event)
	b = appendInt(b, "pid", p.PID)
	if p.PPID != 0 {
		b = appendInt(b, "ppid", p.PPID)
	}
	if p.Event != ProcAttach {
		b = appendUint(b, "ts", p.TS)
	}
	if p.Comm != "" {
		b = appendStr(b, "comm", p.Comm)
	}
	if p.Cmd != "" {
		b = appendStr(b, "cmd", p.Cmd)
	}
	if p.Reason != "" {
		b = appendStr(b, "reason", p.Reason)
	}
	if p.Signal != "" {
		b = appendStr(b, "signal", p.Signal)
	} else if p.HasStatus {
		b = appendInt(b, "status", int64(p.Status))
	}
	return append(b, '\n')
}

// ParseProc reads the fields of a proc line.
func ParseProc(rest []byte) (Proc, error) {
	var p Proc
	fr := fieldReader{word: WordProc}
	for _, kv := range Fields(rest) {
		switch kv.Key {
		case "event":
			p.Event = kv.Value
		case "pid":
			p.PID = fr.int(kv)
		case "ppid":
			p.PPID = fr.int(kv)
		case "ts":
			p.TS = fr.uint(kv)
		case "comm":
			p.Comm = kv.Value
		case "cmd":
			p.Cmd = kv.Value
		case "reason":
			p.Reason = kv.Value
		case "status":
			v := fr.int(kv)
			if v < 0 || v > 255 {
				fr.bad(kv.Key, "an exit status of 0 to 255")
				v = 0
			}
			p.Status, p.HasStatus = int(v), fr.err == nil
		case "signal":
			p.Signal = kv.Value
		}
	}
	return p, fr.err
}

// Lost is a "lost count= total= ts=" line: records the tracer dropped.
type Lost struct {
	Count uint64 // dropped since the last lost line
	Total uint64 // dropped since tracing started
	TS    uint64 // microseconds since tracing started, when it was noticed
}

// AppendLost appends l's line to b.
func AppendLost(b []byte, l Lost) []byte {
	b = appendWord(b, WordLost)
	b = appendUint(b, "count", l.Count)
	b = appendUint(b, "total", l.Total)
	b = appendUint(b, "ts", l.TS)
	return append(b, '\n')
}

// ParseLost reads the fields of a lost line.
func ParseLost(rest []byte) (Lost, error) {
	var l Lost
	fr := fieldReader{word: WordLost}
	for _, kv := range Fields(rest) {
		switch kv.Key {
		case "count":
			l.Count = fr.uint(kv)
		case "total":
			l.Total = fr.uint(kv)
		case "ts":
			l.TS = fr.uint(kv)
		}
	}
	return l, fr.err
}

// Summary is the last line of a session:
// "summary events= allocs= frees= lost= duration_us=".
type Summary struct {
	Events, Allocs, Frees, Lost uint64
	DurationUS                  int64 // wall-clock length of the session
}

// AppendSummary appends s's line to b.
func AppendSummary(b []byte, s Summary) []byte {
	b = appendWord(b, WordSummary)
	b = appendUint(b, "events", s.Events)
	b = appendUint(b, "allocs", s.Allocs)
	b = appendUint(b, "frees", s.Frees)
	b = appendUint(b, "lost", s.Lost)
	b = appendInt(b, "duration_us", s.DurationUS)
	return append(b, '\n')
}

// ParseSummary reads the fields of a summary line.
func ParseSummary(rest []byte) (Summary, error) {
	var s Summary
	fr := fieldReader{word: WordSummary}
	for _, kv := range Fields(rest) {
		switch kv.Key {
		case "events":
			s.Events = fr.uint(kv)
		case "allocs":
			s.Allocs = fr.uint(kv)
		case "frees":
			s.Frees = fr.uint(kv)
		case "lost":
			s.Lost = fr.uint(kv)
		case "duration_us":
			s.DurationUS = fr.int(kv)
		}
	}
	return s, fr.err
}

// Snapshot is the first line of a process's snapshot (--interval):
// "snapshot pid= ts= current= peak= peak_ts= blocks= fds=".
type Snapshot struct {
	PID     int64
	TS      uint64 // microseconds since tracing started
	Current uint64 // live bytes now
	Peak    uint64
	PeakTS  uint64
	Blocks  uint64 // live blocks now
	FDs     uint64 // open descriptors now
}

// AppendSnapshot appends s's line to b.
func AppendSnapshot(b []byte, s Snapshot) []byte {
	b = appendWord(b, WordSnapshot)
	b = appendInt(b, "pid", s.PID)
	b = appendUint(b, "ts", s.TS)
	b = appendUint(b, "current", s.Current)
	b = appendUint(b, "peak", s.Peak)
	b = appendUint(b, "peak_ts", s.PeakTS)
	b = appendUint(b, "blocks", s.Blocks)
	b = appendUint(b, "fds", s.FDs)
	return append(b, '\n')
}

// ParseSnapshot reads the fields of a snapshot line.
func ParseSnapshot(rest []byte) (Snapshot, error) {
	var s Snapshot
	fr := fieldReader{word: WordSnapshot}
	for _, kv := range Fields(rest) {
		switch kv.Key {
		case "pid":
			s.PID = fr.int(kv)
		case "ts":
			s.TS = fr.uint(kv)
		case "current":
			s.Current = fr.uint(kv)
		case "peak":
			s.Peak = fr.uint(kv)
		case "peak_ts":
			s.PeakTS = fr.uint(kv)
		case "blocks":
			s.Blocks = fr.uint(kv)
		case "fds":
			s.FDs = fr.uint(kv)
		}
	}
	return s, fr.err
}

// SnapshotTop is one of the call stacks holding the most live memory in a
// snapshot: "snapshot-top pid= rank= bytes= blocks= stack=".
type SnapshotTop struct {
	PID    int64
	Rank   int64 // 1 for the largest
	Bytes  uint64
	Blocks uint64
	Stack  string // "f < g < main", innermost first
}

// AppendSnapshotTop appends s's line to b.
func AppendSnapshotTop(b []byte, s SnapshotTop) []byte {
	b = appendWord(b, WordSnapshotTop)
	b = appendInt(b, "pid", s.PID)
	b = appendInt(b, "rank", s.Rank)
	b = appendUint(b, "bytes", s.Bytes)
	b = appendUint(b, "blocks", s.Blocks)
	b = appendStr(b, "stack", s.Stack)
	return append(b, '\n')
}

// ParseSnapshotTop reads the fields of a snapshot-top line.
func ParseSnapshotTop(rest []byte) (SnapshotTop, error) {
	var s SnapshotTop
	fr := fieldReader{word: WordSnapshotTop}
	for _, kv := range Fields(rest) {
		switch kv.Key {
		case "pid":
			s.PID = fr.int(kv)
		case "rank":
			s.Rank = fr.int(kv)
		case "bytes":
			s.Bytes = fr.uint(kv)
		case "blocks":
			s.Blocks = fr.uint(kv)
		case "stack":
			s.Stack = kv.Value
		}
	}
	return s, fr.err
}

// SnapshotFD is one open descriptor in a snapshot:
// "snapshot-fd pid= fd= kind= call= path=".
type SnapshotFD struct {
	PID, FD    int64
	Kind, Call string
	Path       string // written (as "") even when empty
}

// AppendSnapshotFD appends s's line to b.
func AppendSnapshotFD(b []byte, s SnapshotFD) []byte {
	b = appendWord(b, WordSnapshotFD)
	b = appendInt(b, "pid", s.PID)
	b = appendInt(b, "fd", s.FD)
	b = appendStr(b, "kind", s.Kind)
	b = appendStr(b, "call", s.Call)
	b = appendStr(b, "path", s.Path)
	return append(b, '\n')
}

// ParseSnapshotFD reads the fields of a snapshot-fd line.
func ParseSnapshotFD(rest []byte) (SnapshotFD, error) {
	var s SnapshotFD
	fr := fieldReader{word: WordSnapshotFD}
	for _, kv := range Fields(rest) {
		switch kv.Key {
		case "pid":
			s.PID = fr.int(kv)
		case "fd":
			s.FD = fr.int(kv)
		case "kind":
			s.Kind = kv.Value
		case "call":
			s.Call = kv.Value
		case "path":
			s.Path = kv.Value
		}
	}
	return s, fr.err
}

// Stack is a "stack" line after the frames of an event: "stack truncated=1
// reason=" when the stack was cut short, "stack missing=1" when the tracer
// never delivered the stack the event names.
type Stack struct {
	Truncated bool
	Reason    string // why it was cut (depth, fp, ...); written with Truncated
	Missing   bool
}

// AppendStack appends s's line to b.
func AppendStack(b []byte, s Stack) []byte {
	b = appendWord(b, WordStack)
	if s.Missing {
		b = append(b, " missing=1"...)
	}
	if s.Truncated {
		b = append(b, " truncated=1"...)
		b = appendStr(b, "reason", s.Reason)
	}
	return append(b, '\n')
}

// AppendStackTruncated appends "stack truncated=1 reason=R".
func AppendStackTruncated(b []byte, reason string) []byte {
	return AppendStack(b, Stack{Truncated: true, Reason: reason})
}

// AppendStackMissing appends "stack missing=1".
func AppendStackMissing(b []byte) []byte {
	return AppendStack(b, Stack{Missing: true})
}

// ParseStack reads the fields of a stack line.
func ParseStack(rest []byte) (Stack, error) {
	var s Stack
	for _, kv := range Fields(rest) {
		switch kv.Key {
		case "truncated":
			s.Truncated = kv.Value == "1"
		case "reason":
			s.Reason = kv.Value
		case "missing":
			s.Missing = kv.Value == "1"
		}
	}
	return s, nil
}

func appendWord(b []byte, word string) []byte {
	b = append(b, TracePrefix...)
	return append(b, word...)
}

// appendStr appends " key=value", Go-quoting the value where a reader
// could not otherwise find its end (see needsQuote).
func appendStr(b []byte, key, v string) []byte {
	b = append(b, ' ')
	b = append(b, key...)
	b = append(b, '=')
	if needsQuote(v) {
		return strconv.AppendQuote(b, v)
	}
	return append(b, v...)
}

func appendUint(b []byte, key string, v uint64) []byte {
	b = append(b, ' ')
	b = append(b, key...)
	b = append(b, '=')
	return strconv.AppendUint(b, v, 10)
}

func appendInt(b []byte, key string, v int64) []byte {
	b = append(b, ' ')
	b = append(b, key...)
	b = append(b, '=')
	return strconv.AppendInt(b, v, 10)
}

func appendHex(b []byte, key string, v uint64) []byte {
	b = append(b, ' ')
	b = append(b, key...)
	b = append(b, "=0x"...)
	return strconv.AppendUint(b, v, 16)
}

// fieldReader converts values and keeps the first error. The error names
// the line and the key but never the value: it comes from a file.
type fieldReader struct {
	word string
	err  error
}

func (r *fieldReader) bad(key, what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s line: %s= is not %s", ErrMalformed, r.word, key, what)
	}
}

func (r *fieldReader) uint(kv KV) uint64 {
	v, err := strconv.ParseUint(kv.Value, 10, 64)
	if err != nil {
		r.bad(kv.Key, "a number")
	}
	return v
}

func (r *fieldReader) int(kv KV) int64 {
	v, err := strconv.ParseInt(kv.Value, 10, 64)
	if err != nil {
		r.bad(kv.Key, "a number")
	}
	return v
}
