package analysis

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func followLog(withSummary bool) []byte {
	var l logb
	l.meta("header", "pid", "9", "mode", "bpf")
	l.alloc(1, "m", "malloc", 1, 16, 0x10).alloc(1, "m", "malloc", 2, 16, 0x20).free(1, "m", "free", 3, 16, 0x10)
	if withSummary {
		l.meta("summary", "events", "3", "allocs", "2", "frees", "1", "lost", "0", "duration_us", "5")
	}
	return l.b
}

// follow streams path as memview -f does and reports when Stream returns.
func follow(t *testing.T, path string) (*Model, chan error, chan struct{}) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m := New()
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- m.Stream(&Follower{R: f, Poll: 10 * time.Millisecond}, StreamOptions{Stop: stop}) }()
	return m, done, stop
}

// A followed file ends with the tracer's summary line: Stream returns and
// the model is done (memview -f then shows ✕ DONE), without a stop.
func TestFollowEndsAtSummary(t *testing.T) {
	for round := 0; round < 5; round++ {
		path := filepath.Join(t.TempDir(), "run.log")
		// Half the log first, the rest (with the summary) while followed.
		full := followLog(true)
		cut := strings.Index(string(full), "[memtrace] summary") + 5
		if err := os.WriteFile(path, full[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		m, done, stop := follow(t, path)
		select {
		case err := <-done:
			t.Fatalf("round %d: stream ended before the summary line was complete: %v", round, err)
		case <-time.After(100 * time.Millisecond):
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(full[cut:])
		f.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			close(stop)
			t.Fatalf("round %d: following did not end after the summary line", round)
		}
		if !m.Done || !m.Ended || m.Len() != 2 {
			t.Fatalf("round %d: done %v ended %v, %d allocs", round, m.Done, m.Ended, m.Len())
		}
		if n, _ := m.Leaks(); n != 1 {
			t.Fatalf("round %d: leaks %d", round, n)
		}
	}
}

// Without the summary the file may still grow: following goes on until
// stopped, and the model is not done.
func TestFollowWithoutSummaryGoesOn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.log")
	if err := os.WriteFile(path, followLog(false), 0o644); err != nil {
		t.Fatal(err)
	}
	m, done, stop := follow(t, path)
	select {
	case err := <-done:
		t.Fatalf("stream of a log without summary ended: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(stop)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("stop did not end the stream")
	}
	if m.Done || m.Ended {
		t.Fatal("a stopped stream marked done")
	}
}

func TestSniffAndEmptyLogHint(t *testing.T) {
	junk := "\x7fELF\x02\x01\x01 binary\nnot a log\n\x00\xff\xfe\n"
	cases := []struct {
		name, text string
		log        bool
		lines      int64
		hint       string
	}{
		{"empty", "", false, 0, "x is empty: no allocation to report"},
		{"junk", junk, false, 3, "no allocation in x: 3 lines read, none of them an allocation or free (is it a memtrace or memtrack log?)"},
		{"broken log lines only", "[memtrack] tid=zz\n[memtrack]   #x\n", false, 2, "no allocation in x: 2 lines read, none of them an allocation or free (is it a memtrace or memtrack log?)"},
		{"output, then a log", junk + string(followLog(false)), true, 4, ""},
		{"header only", "[memtrace] header pid=1\n", true, 1, ""},
	}
	for _, c := range cases {
		got, err := Sniff(strings.NewReader(c.text))
		if err != nil {
			t.Fatal(err)
		}
		if got.HasLogLine() != c.log || got.Lines != c.lines {
			t.Errorf("%s: log %v after %d lines, want %v after %d", c.name, got.HasLogLine(), got.Lines, c.log, c.lines)
		}
		// The model reading the whole input agrees.
		m := load(t, []byte(c.text))
		if m.Counts.HasLogLine() != c.log {
			t.Errorf("%s: the model says log %v", c.name, m.Counts.HasLogLine())
		}
		if !c.log {
			if h := EmptyLogHint("x", m.Counts.Lines, m.Counts.Events); h != c.hint {
				t.Errorf("%s: hint %q", c.name, h)
			}
		}
	}
}
