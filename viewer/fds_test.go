package viewer

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gdamore/tcell/v2"

	"github.com/memtrace/memtrace/analysis"
)

// fdViewLog: process 100 (threads app 100, worker 101) opens a file it
// closes, a file it reuses the number of, a pipe, a socket in the worker,
// a dma-buf; it exits with the tracer's leak lines. Process 200 (forked)
// is killed: its socket leaks at the end of the log.
const fdViewLog = `[memtrace] header version=1 pid=100 comm=app cmd=./app start=0 mode=launch
[memtrack] tid=100 (app            ) malloc ts=1 size=16 total=16 ptr=0x10
[memtrace] thread tid=101 pid=100 name=worker
[memtrack] tid=101 (worker         ) malloc ts=2 size=16 total=16 ptr=0x20
[memtrace] fd event=open tid=100 pid=100 ts=10 name=app fd=3 call=openat kind=file path=/etc/hosts
[memtrace] fd event=close tid=100 pid=100 ts=11 name=app fd=3 call=close kind=file path=/etc/hosts
[memtrace] fd event=open tid=100 pid=100 ts=12 name=app fd=3 call=openat kind=file path=/tmp/kept.txt
[memtrace] fd event=open tid=100 pid=100 ts=13 name=app fd=4 call=pipe2 kind=pipe peer=5
[memtrace] fd event=open tid=100 pid=100 ts=13 name=app fd=5 call=pipe2 kind=pipe peer=4
[memtrace] fd event=close tid=100 pid=100 ts=14 name=app fd=5 call=close kind=pipe
[memtrace] fd event=open tid=101 pid=100 ts=15 name=worker fd=6 call=socket kind=socket domain=inet
[memtrace] fd event=open tid=100 pid=100 ts=16 name=app fd=7 call=ioctl kind=dmabuf dev=9
[memtrace] dmabuf event=alloc tid=100 pid=100 ts=16 name=app fd=7 size=8192 heap=system dev=9 flags=0x2 heap_flags=0x0 buf=1
[memtrace] proc event=fork pid=200 ppid=100 comm=kid ts=17
[memtrace] thread tid=200 pid=200 name=kid
[memtrack] tid=200 (kid            ) malloc ts=18 size=16 total=16 ptr=0x30
[memtrace] fd event=close tid=200 pid=200 ts=18 name=kid fd=3 call=close kind=file
[memtrace] fd event=close tid=200 pid=200 ts=18 name=kid fd=4 call=close kind=pipe
[memtrace] fd event=close tid=200 pid=200 ts=18 name=kid fd=6 call=close kind=socket
[memtrace] fd event=close tid=200 pid=200 ts=18 name=kid fd=7 call=close kind=dmabuf
[memtrace] fd event=open tid=200 pid=200 ts=19 name=kid fd=3 call=socket kind=socket domain=unix
[memtrace] proc event=exit pid=100 ts=30
[memtrace] fd event=leak tid=100 pid=100 ts=12 fd=3 call=openat kind=file path=/tmp/kept.txt
[memtrace] fd event=leak tid=100 pid=100 ts=13 fd=4 call=pipe2 kind=pipe
[memtrace] fd event=leak tid=101 pid=100 ts=15 fd=6 call=socket kind=socket
[memtrace] fd event=leak tid=100 pid=100 ts=16 fd=7 call=ioctl kind=dmabuf buf=1 size=8192
`

// fdRows are the descriptor rows of the list pane (those with a status tag).
func (h *harness) fdRows() []string {
	var out []string
	for y := 4; y < 34; y++ {
		r := h.listRow(y)
		if strings.HasPrefix(r, "[L]") || strings.HasPrefix(r, "[O]") || strings.HasPrefix(r, "[C]") {
			out = append(out, strings.Join(strings.Fields(r), " "))
		}
	}
	return out
}

func TestDescriptorView(t *testing.T) {
	h := newHarness(t, []byte(fdViewLog), Options{})
	// The header counts leaked descriptors even in the allocation list.
	h.contains("FD leaks: 5")
	h.lacks("St.  FD Kind")

	h.keys("o")
	h.contains("St.  FD Kind     Call")
	h.contains("Filter: FDs Open+Leaked")
	h.contains("5 descriptors shown")
	got := strings.Join(h.fdRows(), "\n")
	want := strings.Join([]string{
		"[L] 3 file openat 0.011ms app /tmp/kept.txt",
		"[L] 4 pipe pipe2 0.012ms app",
		"[L] 6 socket socket 0.014ms worker",
		"[L] 7 dmabuf ioctl 0.015ms app 8.19K system",
		"[L] 3 socket socket 0.018ms kid",
	}, "\n")
	if got != want {
		t.Fatalf("descriptor rows\n got:\n%s\nwant:\n%s\nscreen:\n%s", got, want, h.screen())
	}
	// Leaks are red and bold; the first row is the cursor, in reverse.
	for y := 4; y < 34; y++ {
		if strings.HasPrefix(h.listRow(y), "[L] 4") {
			fg, _, attr := h.style(2, y).Decompose()
			if fg != tcell.ColorRed || attr&tcell.AttrBold == 0 {
				t.Fatalf("leak row not red bold: %v %v", fg, attr)
			}
		}
	}
	if r := h.cursorRow(); r < 0 || !strings.HasPrefix(h.listRow(r), "[L]   3 file") {
		t.Fatalf("cursor row %d", r)
	}
	// Detail of the row under the cursor.
	h.contains("── Descriptor")
	h.contains("Path    : /tmp/kept.txt")
	h.contains("listed open at the process's exit")
	h.press(tcell.KeyDown, 0)
	h.press(tcell.KeyDown, 0)
	h.press(tcell.KeyDown, 0)
	h.contains("Buffer  : #1 8.19K system")

	// f cycles the view's own filter.
	h.keys("f")
	h.contains("Filter: FDs Leaked")
	h.contains("5 descriptors shown")
	h.keys("f")
	h.contains("Filter: FDs Open")
	h.contains("no descriptors (Open)")
	h.keys("f")
	h.contains("Filter: FDs Closed")
	if rows := h.fdRows(); len(rows) != 6 || rows[0] != "[C] 3 file openat 0.009ms app /etc/hosts" {
		t.Fatalf("closed rows %q", rows)
	}
	h.contains("Call    : close")
	h.keys("f")
	h.contains("Filter: FDs All")
	h.contains("11 descriptors shown")
	h.keys("f")
	h.contains("Filter: FDs Open+Leaked")

	// The thread filter: the worker opened only the socket.
	h.keys("t") // app
	h.contains("Thread: app (100)")
	h.contains("3 descriptors shown")
	h.keys("t") // kid
	h.keys("t") // worker
	h.contains("Thread: worker (101)")
	if rows := h.fdRows(); len(rows) != 1 || rows[0] != "[L] 6 socket socket 0.014ms worker" {
		t.Fatalf("worker rows %q", rows)
	}
	h.keys("t") // All

	// The process filter: the killed child's socket, and the header counts
	// that process's leaks only.
	h.keys("p")
	h.contains("Proc: 100 app")
	h.contains("FD leaks: 4")
	h.keys("p")
	h.contains("Proc: 200 kid")
	h.contains("FD leaks: 1")
	if rows := h.fdRows(); len(rows) != 1 || rows[0] != "[L] 3 socket socket 0.018ms kid" {
		t.Fatalf("child rows %q", rows)
	}
	h.keys("p")

	// o again: back to the allocations, with their own filter.
	h.keys("o")
	h.contains("Filter: All")
	h.contains("3 shown")
}

func TestDumpThreadsListsFDLeaks(t *testing.T) {
	m := analysis.New()
	m.SummaryOnly = true
	if err := m.ReadAll(strings.NewReader(fdViewLog)); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteThreadTable(&out, m); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	_, list, ok := strings.Cut(s, "5 file descriptors leaked")
	if !ok {
		t.Fatalf("no fd leak count:\n%s", s)
	}
	var rows []string
	for _, l := range strings.Split(strings.TrimSpace(list), "\n")[2:] {
		rows = append(rows, strings.Join(strings.Fields(l), " "))
	}
	want := []string{
		"100 3 file openat 100 12 /tmp/kept.txt",
		"100 4 pipe pipe2 100 13",
		"100 6 socket socket 101 15",
		"100 7 dmabuf ioctl 100 16 dmabuf buffer 8192 bytes system",
		"200 3 socket socket 200 19",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}
