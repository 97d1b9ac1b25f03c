package agent

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/logfmt"
)

type figures struct {
	peak, peakTS, current, blocksAtPeak uint64
}

// snapshotFigures reads the last snapshot line of each process in log.
func snapshotFigures(t *testing.T, log []byte) map[int64]figures {
	t.Helper()
	out := map[int64]figures{}
	sc := logfmt.NewScanner(bytes.NewReader(log))
	for sc.Scan() {
		if !bytes.HasPrefix(sc.Line(), []byte("[memtrace] snapshot ")) {
			continue
		}
		kv := map[string]uint64{}
		for _, f := range strings.Fields(string(sc.Line()))[2:] {
			k, v, _ := strings.Cut(f, "=")
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("snapshot line %q: %v", sc.Line(), err)
			}
			kv[k] = n
		}
		out[int64(kv["pid"])] = figures{peak: kv["peak"], peakTS: kv["peak_ts"], current: kv["current"]}
	}
	return out
}

// reportFigures is what memtrace report's model makes of log.
func reportFigures(t *testing.T, log []byte) map[int64]figures {
	t.Helper()
	m := analysis.New()
	if err := m.ReadAll(bytes.NewReader(log)); err != nil {
		t.Fatalf("the model refuses the agent's log: %v", err)
	}
	out := map[int64]figures{}
	for _, pc := range m.ReportCosts().Procs {
		var live uint64
		for tid := range m.Threads {
			if m.Threads[tid].Proc == pc.Proc {
				live += m.Threads[tid].LiveBytes
			}
		}
		out[m.Procs[pc.Proc].PID] = figures{peak: pc.PeakBytes, peakTS: pc.PeakTS, current: live, blocksAtPeak: uint64(pc.PeakCount)}
	}
	return out
}

// randomEvents is a run of two processes (one launched, one attached)
// with threads that free each other's blocks, reallocs in place and moved,
// 0-byte blocks, addresses reused, frees of blocks never seen, and kernel
// time stamps 300 ns apart, so that several share a log microsecond. In
// the launched process an address is also allocated again while live (its
// free lost): both keep the old block live. Not in the attached one, where
// the agent logs a second free of such an address with size 0 and the
// model gives it to the older block, which the agent's table no longer
// has (the figures then differ by that block).
func randomEvents(r *rand.Rand, n int, ts *uint64) []*event.Event {
	var out []*event.Event
	live := map[uint32][]uint64{1: nil, 2: nil}
	for range n {
		pid := uint32(1 + r.IntN(2))
		tid := pid*100 + uint32(r.IntN(3))
		*ts += 300
		e := &event.Event{TS: *ts, TGID: pid, TID: tid, Op: uint8(logfmt.OpMalloc)}
		copy(e.Comm[:], fmt.Sprintf("t%d", tid))
		size := uint64(r.IntN(5000))
		if r.IntN(8) == 0 {
			size = 0
		}
		ls := live[pid]
		ptr := 0x1000 * uint64(1+r.IntN(40)) // few addresses: they are reused
		for pid == 2 && slices.Contains(ls, ptr) {
			ptr += 0x1000 * 40
		}
		switch k := r.IntN(10); {
		case k < 5 || len(ls) == 0:
			e.Kind, e.Ptr, e.Size = event.KindAlloc, ptr, size
			live[pid] = append(ls, ptr)
		case k < 8:
			i := r.IntN(len(ls))
			e.Kind, e.Op, e.Ptr = event.KindFree, uint8(logfmt.OpFree), ls[i]
			live[pid] = append(ls[:i], ls[i+1:]...)
		case k < 9:
			// A realloc, as both captures send it: the old block's
			// free, then the new block.
			i := r.IntN(len(ls))
			f := *e
			f.Kind, f.Op, f.Ptr = event.KindFree, uint8(logfmt.OpFree), ls[i]
			out = append(out, &f)
			e.Kind, e.Op, e.Ptr, e.Size = event.KindAlloc, uint8(logfmt.OpRealloc), ls[i], size
			if r.IntN(2) == 0 {
				e.Ptr = ptr
				ls[i] = ptr
			}
		default:
			e.Kind, e.Op, e.Ptr = event.KindFree, uint8(logfmt.OpFree), 0xdead0000+uint64(r.IntN(4))*0x10
		}
		out = append(out, e)
	}
	return out
}

// TestSnapshotsAgreeWithReport: the same events through the agent (its
// --interval snapshot lines and its --report-dir figures) and through the
// report's model (the log they produced, read back) give the same peak,
// peak time, blocks live at the peak and current bytes, at every snapshot.
func TestSnapshotsAgreeWithReport(t *testing.T) {
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 13))
		var buf bytes.Buffer
		s := New(Config{Out: &buf, Reports: true, PeakTopN: 10})
		s.AddProcess(1, false)
		s.AddProcess(2, true)
		s.procs[1].scanned, s.procs[2].scanned = true, true
		reports := map[int64]*ProcessReport{}
		s.OnProcessReport = func(r *ProcessReport) { reports[int64(r.PID)] = r }
		var ts uint64
		snaps := 0
		for range 1 + r.IntN(6) {
			for _, e := range randomEvents(r, 1+r.IntN(300), &ts) {
				s.Add(e)
			}
			s.Drain(true)
			s.Snapshot(ts)
			snaps++
			log := bytes.Clone(buf.Bytes())
			got, want := snapshotFigures(t, log), reportFigures(t, log)
			for pid, w := range want {
				w.blocksAtPeak = 0 // snapshot lines do not carry it
				if g := got[pid]; g != w {
					t.Fatalf("seed %d, snapshot %d, pid %d: snapshot %+v, report %+v\n%s", seed, snaps, pid, g, w, log)
				}
			}
		}
		s.FinalReports()
		want := reportFigures(t, buf.Bytes())
		if len(reports) != len(want) {
			t.Fatalf("seed %d: %d process reports, the model has %d processes", seed, len(reports), len(want))
		}
		for pid, rep := range reports {
			// Without stacks every block is stack 0: one entry at the peak.
			var atPeak uint64
			for _, e := range rep.PeakTop {
				atPeak += e.Blocks
			}
			g := figures{peak: rep.Peak, peakTS: rep.PeakUS, current: rep.Current, blocksAtPeak: atPeak}
			if w := want[pid]; g != w {
				t.Fatalf("seed %d, pid %d: --report-dir figures %+v, report %+v", seed, pid, g, w)
			}
		}
	}
}
