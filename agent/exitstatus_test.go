package agent

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/event"
)

// TestExitLineStatus: the exit line of the process memtrace started waits
// for the launcher's wait status (status=N or signal=NAME), but at most
// exitStatusWait; other processes' exit lines never wait.
func TestExitLineStatus(t *testing.T) {
	ps := func(script string) *exec.Cmd {
		c := exec.Command("sh", "-c", script)
		c.Run()
		return c
	}
	exit3, segv := ps("exit 3"), ps("kill -SEGV $$")
	for _, c := range []struct {
		name     string
		launched bool
		set      *exec.Cmd
		want     string
		maxWait  time.Duration
	}{
		{"status", true, exit3, " status=3\n", exitStatusWait},
		{"signal", true, segv, " signal=SIGSEGV\n", exitStatusWait},
		{"never reaped", true, nil, " ts=1\n", 2 * exitStatusWait}, // counted from the release at 1 ns
		{"not launched", false, nil, " ts=2\n", exitStatusWait / 5},
	} {
		var out bytes.Buffer
		s := New(Config{Out: &out})
		if c.launched {
			s.AddLaunched(5)
			s.Released(5, 1)
		} else {
			s.AddProcess(5, true)
		}
		if c.set != nil {
			go func() {
				time.Sleep(20 * time.Millisecond) // reaped after the exit event, as in a run
				s.SetExitStatus(5, c.set.ProcessState)
			}()
		}
		start := time.Now()
		s.Add(&event.Event{TS: 2000, TGID: 5, TID: 5, Kind: event.KindExit})
		s.Drain(true)
		s.Flush()
		took := time.Since(start)
		var exit string
		for _, l := range strings.SplitAfter(out.String(), "\n") {
			if strings.Contains(l, "proc event=exit") {
				exit = l
			}
		}
		if !strings.HasSuffix(exit, c.want) {
			t.Errorf("%s: exit line %q, want it to end %q", c.name, exit, c.want)
		}
		if took > c.maxWait+200*time.Millisecond {
			t.Errorf("%s: the exit line took %v", c.name, took)
		}
	}
}
