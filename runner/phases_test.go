package runner

import (
	"strings"
	"testing"
	"time"
)

func TestPhaseLine(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range []struct {
		released, exited time.Time
		want             string
	}{
		{at(120), at(1120), "start-up 120.0 ms (memtrace's start to the program's release), run 1000.0 ms, end 80.0 ms"},
		// An attach: no release; a detach: no exit.
		{time.Time{}, time.Time{}, "start-up - ms (memtrace's start to the program's release), run 1200.0 ms, end - ms"},
	} {
		got := phaseLine(t0, c.released, c.exited, at(1200))
		if !strings.Contains(got, c.want) {
			t.Errorf("phaseLine = %q, want it to contain %q", got, c.want)
		}
	}
}
