package preload

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/agent"
	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/logfmt"
)

// TestTextModeMatchesAgent is the golden test of the two writers of the
// log: the records of a text-mode run (the C library writing lines
// itself) go through the Go agent, the writer of the eBPF path and of
// the preload converter, and every line both write comes out in the same
// bytes. The agent's header and proc lines come from its typed methods,
// its events and frames from Emit and ResolvedStack. The lines only the
// agent writes (thread lines, a process's exit line) are left out of the
// comparison; the text mode writes neither.
func TestTextModeMatchesAgent(t *testing.T) {
	for _, c := range []struct {
		mode   string
		status int      // the program's exit status
		want   []string // the kinds of line the run must write, for the comparison to cover them
	}{
		// Events of two threads (one renamed), stacks, every op.
		{"fmt", 0, []string{"header", "alloc", "free", "exit", "frame"}},
		// An exec: the new image's proc line.
		{"exec", 3, []string{"header", "alloc", "proc"}},
	} {
		t.Run(c.mode, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "log")
			out, err := runDirect(t, []string{"MEMTRACK_OUTPUT=" + log, "MEMTRACK_STACK_DEPTH=6"}, c.mode, "a\tb\r\a\"c\\ d\x7f")
			if st := runStatus(err); st != c.status {
				t.Fatalf("exit status %d (%v), want %d\n%s", st, err, c.status, out)
			}
			data, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			matchAgent(t, data, c.want)
		})
	}
}

// runStatus is the exit code behind a command's error, 0 for none.
func runStatus(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// matchAgent replays a text-mode log through an agent.Session and
// compares the bytes; want are the kinds of line the log must hold.
func matchAgent(t *testing.T, data []byte, want []string) {
	t.Helper()
	var out bytes.Buffer
	s := agent.New(agent.Config{Out: &out, InProcess: true})
	var pid int64
	var held *event.Event // the last event, until its frames are read
	var frames []agent.Frame
	var stackID uint64
	emit := func() {
		if held == nil {
			return
		}
		if len(frames) > 0 {
			stackID++
			s.ResolvedStack(stackID, frames)
			held.Stack = stackID
		}
		s.Emit(held)
		held, frames = nil, nil
	}
	kinds := map[string]int{}
	sc := logfmt.NewScanner(bytes.NewReader(data))
	var l logfmt.Line
	for sc.Scan() {
		if err := l.Parse(sc.Line()); err != nil {
			t.Fatalf("logfmt cannot read %q: %v", sc.Line(), err)
		}
		if l.Kind == logfmt.KindFrame {
			frames = append(frames, agent.Frame{Module: string(l.Module), Symbol: string(l.Symbol), Offset: l.Offset, Addr: l.Addr})
			kinds["frame"]++
			continue
		}
		emit()
		switch l.Kind {
		case logfmt.KindAlloc, logfmt.KindFree, logfmt.KindExit:
			e := &event.Event{TS: l.TS * 1000, TID: uint32(l.TID), TGID: uint32(pid), Op: uint8(l.Op), Ptr: l.Ptr, Size: l.Size}
			for i := 0; i < len(l.Name) && i < len(e.Comm)-1; i++ {
				e.Comm[i] = l.Name[i]
			}
			switch l.Kind {
			case logfmt.KindAlloc:
				e.Kind = event.KindAlloc
				kinds["alloc"]++
			case logfmt.KindFree:
				e.Kind = event.KindFree
				kinds["free"]++
			default:
				e.Kind = event.KindExit
				kinds["exit"]++
			}
			held = e
		case logfmt.KindMeta:
			switch string(l.Word) {
			case logfmt.WordHeader:
				h, err := logfmt.ParseHeader(l.Rest)
				if err != nil {
					t.Fatalf("%q: %v", sc.Line(), err)
				}
				pid = h.PID
				s.Header(h)
			case logfmt.WordProc:
				p, err := logfmt.ParseProc(l.Rest)
				if err != nil {
					t.Fatalf("%q: %v", sc.Line(), err)
				}
				if p.Event == logfmt.ProcExec {
					// The agent's own exec path, and the new image's
					// thread starts again, its total too, as the
					// converter tells the session (ForgetThread).
					e := &event.Event{TS: p.TS * 1000, TID: uint32(p.PID), TGID: uint32(p.PID), Kind: event.KindExec}
					copy(e.Comm[:len(e.Comm)-1], p.Comm)
					s.EmitExec(e, uint32(p.PPID), p.Cmd)
					s.ForgetThread(uint32(p.PID))
				} else {
					s.Proc(p)
				}
			default:
				t.Fatalf("a [memtrace] line the agent has no typed method for: %q", sc.Line())
			}
			kinds[string(l.Word)]++
		default:
			t.Fatalf("not a log line: %q", sc.Line())
		}
	}
	emit()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, k := range want {
		if kinds[k] == 0 {
			t.Errorf("the text mode wrote no %s line: the comparison does not cover it (%v)", k, kinds)
		}
	}
	var got []string
	for _, line := range strings.SplitAfter(out.String(), "\n") {
		if strings.HasPrefix(line, logfmt.TracePrefix+logfmt.WordThread+" ") ||
			strings.HasPrefix(line, logfmt.TracePrefix+logfmt.WordProc+" event="+logfmt.ProcExit+" ") || line == "" {
			continue
		}
		got = append(got, line)
	}
	lines := strings.SplitAfter(string(data), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	for i := 0; i < max(len(got), len(lines)); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(lines) {
			w = lines[i]
		}
		if g != w {
			t.Fatalf("line %d differs\ntext mode: %q\nagent:     %q", i+1, w, g)
		}
	}
}
