package agent

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/logfmt"
)

// TestSnapshotsUntil: --interval's snapshots are due at the multiples of
// the interval on the events' clock: each is written among the event
// lines at its time with the figures of the events before it, every
// boundary gets one however late the events are written, a quiet stretch
// gets them from SnapshotsUntil, and none comes before the first event or
// twice for one boundary.
func TestSnapshotsUntil(t *testing.T) {
	var buf bytes.Buffer
	ms := uint64(time.Millisecond)
	s := New(Config{Out: &buf, InProcess: true, Reports: true, Interval: 10 * time.Millisecond})
	s.SnapshotsUntil(25 * ms) // no event yet: nothing
	s.Emit(ev(5*ms, 1, event.KindAlloc, logfmt.OpMalloc, 0x10, 100, "app"))
	s.Emit(ev(15*ms, 1, event.KindAlloc, logfmt.OpMalloc, 0x20, 20, "app"))
	s.Emit(ev(37*ms, 1, event.KindFree, logfmt.OpFree, 0x10, 0, "app"))
	s.SnapshotsUntil(52 * ms)
	s.SnapshotsUntil(52 * ms)
	s.Emit(ev(55*ms, 1, event.KindAlloc, logfmt.OpMalloc, 0x30, 3, "app"))
	s.Flush()
	var got []string
	re := regexp.MustCompile(`^\[memtrace\] snapshot pid=1 ts=(\d+) current=(\d+) `)
	for _, ln := range strings.Split(buf.String(), "\n") {
		if m := re.FindStringSubmatch(ln); m != nil {
			got = append(got, m[1]+":"+m[2])
		} else if strings.HasPrefix(ln, "[memtrack]") && strings.Contains(ln, " ts=") {
			got = append(got, "event")
		}
	}
	want := "event 10000:100 event 20000:120 30000:120 event 40000:20 50000:20 event"
	if g := strings.Join(got, " "); g != want {
		t.Errorf("lines in order:\n got  %s\n want %s", g, want)
	}
}
