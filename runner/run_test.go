package runner

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/memtrace/memtrace/agent"
	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/logfmt"
)

// fakeSource is a Source that traces nothing real: its Trace writes a
// header, one 1000-byte leak of process 7 and the summary, and it records
// what Run asked of it.
type fakeSource struct {
	name     string
	startErr error
	status   int
	calls    []string
	// during runs inside Trace, once the leak is in the Session.
	during func(r *Handle)
}

func (f *fakeSource) Start(r *Handle) (int, error) {
	f.calls = append(f.calls, "start")
	r.SetProbes(func() int { return 3 })
	return 1, f.startErr
}

func (f *fakeSource) Configure(c *agent.Config) {
	f.calls = append(f.calls, "configure")
	c.InProcess = true
}

func (f *fakeSource) Trace(r *Handle, s *agent.Session) (int, error) {
	f.calls = append(f.calls, "trace")
	s.Header(logfmt.Header{Version: "t", PID: 7, Comm: "app", Mode: f.name})
	e := event.Event{TS: 1000, Ptr: 0x1000, Size: 1000, TGID: 7, TID: 7, Kind: event.KindAlloc, Op: uint8(logfmt.OpMalloc)}
	copy(e.Comm[:], "app")
	s.Emit(&e)
	if err := s.Flush(); err != nil {
		return 1, fmt.Errorf("write log: %w", err)
	}
	if f.during != nil {
		f.during(r)
	}
	s.Summary(1)
	return f.status, s.Flush()
}

func (f *fakeSource) Close() error {
	f.calls = append(f.calls, "close")
	return nil
}

// TestRunFallsBack: a source unavailable here gives one notice and the
// fallback's run, with its log and closing lines; the first source is
// not closed (it started nothing), the fallback is, after its Trace.
func TestRunFallsBack(t *testing.T) {
	log := filepath.Join(t.TempDir(), "app.log")
	first := &fakeSource{name: "bpf", startErr: Unavailable(errors.New("no BPF here"))}
	second := &fakeSource{name: "preload", status: 3}
	var stderr bytes.Buffer
	status, err := Run(Options{Argv: []string{"true"}, Output: FileOutput(log)}, &stderr, first, second)
	if status != 3 || err != nil {
		t.Fatalf("Run = %d, %v; want the fallback's 3, nil", status, err)
	}
	if got := strings.Join(first.calls, " "); got != "start" {
		t.Errorf("unavailable source: %s, want start only", got)
	}
	if got := strings.Join(second.calls, " "); got != "start configure trace close" {
		t.Errorf("fallback: %s, want start configure trace close", got)
	}
	se := stderr.String()
	if !strings.HasPrefix(se, "memtrace: notice: no BPF here; using the LD_PRELOAD fallback\n") || strings.Count(se, "notice") != 1 {
		t.Errorf("stderr %q: want the one notice first", se)
	}
	if !strings.Contains(se, "calls to allocation functions: 1\n") || !strings.Contains(se, "1000B (1 blocks)") {
		t.Errorf("no closing lines with the fallback's leak:\n%s\nlog:\n%s", se, readFile(log))
	}
	if b, _ := os.ReadFile(log); !bytes.Contains(b, []byte("mode=preload")) {
		t.Errorf("log:\n%s", b)
	}
	// In -p mode nothing falls back: the error is the run's, with what
	// the user can do instead.
	first.calls = nil
	status, err = Run(Options{PIDs: []int{os.Getpid()}, Output: FileOutput(log)}, &stderr, first, second)
	want := "no BPF here; the LD_PRELOAD fallback cannot attach to a running process: restart the program under memtrace --preload -- PROG"
	if status != 1 || err == nil || err.Error() != want || !errors.Is(err, ErrUnavailable) {
		t.Errorf("-p: Run = %d, %v; want 1, %s", status, err, want)
	}
}

// TestRunLogWriteFails: when memtrace started the program, a log that
// cannot be written ends the log, not the run: the source's status is
// memtrace's, and one line says the log is incomplete instead of the
// closing figures.
func TestRunLogWriteFails(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	src := &fakeSource{name: "bpf", status: 5}
	var stderr bytes.Buffer
	status, err := Run(Options{Argv: []string{"true"}, Output: FileOutput("/dev/full"), OpenLog: func(p string) (*os.File, error) {
		return os.OpenFile(p, os.O_WRONLY, 0)
	}}, &stderr, src, nil)
	if status != 5 || err != nil {
		t.Fatalf("Run = %d, %v; want 5, nil", status, err)
	}
	se := stderr.String()
	if strings.Count(se, "\n") != 1 || !strings.Contains(se, "write log: ") || !strings.Contains(se, "no space left on device") || !strings.Contains(se, "the log is incomplete") {
		t.Errorf("stderr %q: want one line saying the log is incomplete", se)
	}
}

// TestRunLiveEndpoint: --http serves the Session's live model whatever the
// source, and /metrics counts the source's probes (SetProbes).
func TestRunLiveEndpoint(t *testing.T) {
	var mu sync.Mutex
	var metrics, heap string
	src := &fakeSource{name: "preload", during: func(r *Handle) {
		addr := regexp.MustCompile(`serving http://([^/]+)/`).FindStringSubmatch(r.Stderr().(*syncBuffer).String())
		if addr == nil {
			t.Error("no serving line")
			return
		}
		get := func(path string) string {
			resp, err := http.Get("http://" + addr[1] + path)
			if err != nil {
				t.Error(err)
				return ""
			}
			defer resp.Body.Close()
			var b bytes.Buffer
			b.ReadFrom(resp.Body)
			return b.String()
		}
		mu.Lock()
		metrics, heap = get("/metrics"), get("/debug/pprof/heap?pid=7")
		mu.Unlock()
	}}
	stderr := &syncBuffer{}
	if status, err := Run(Options{Argv: []string{"true"}, Output: Output{Kind: OutNone}, HTTP: "127.0.0.1:0"}, stderr, src, nil); status != 0 || err != nil {
		t.Fatalf("Run = %d, %v", status, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{`(?m)^memtrace_probes_attached 3$`, `(?m)^memtrace_live_bytes\{[^}]*pid="7"\} 1000$`} {
		if !regexp.MustCompile(want).MatchString(metrics) {
			t.Errorf("/metrics lacks %s:\n%s", want, metrics)
		}
	}
	if len(heap) == 0 {
		t.Error("no heap profile")
	}
	// -o none still ends with the figures the agent counted
	// (docs/closing.md), and says no log was written.
	if !strings.Contains(stderr.String(), "memtrace stats:\n\trun: interrupted\n\tcalls to allocation functions: 1\n") ||
		!strings.Contains(stderr.String(), "no log was written (-o none)") {
		t.Errorf("-o none: want the closing figures and no log:\n%s", stderr.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}
