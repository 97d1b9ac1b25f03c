package agent

import (
	"time"

	"github.com/memtrace/memtrace/internal/exitreport"
	fig "github.com/memtrace/memtrace/internal/figures"
	"github.com/memtrace/memtrace/internal/procfs"
	"github.com/memtrace/memtrace/logfmt"
)

// ProcessReport is a process's figures at its exit, for the runner's
// OnProcessReport (procreport writes it).
type ProcessReport = exitreport.Report

const stackTextFrames = 12

func (s *Session) entries(cs []StackCost) []exitreport.Entry {
	out := make([]exitreport.Entry, len(cs))
	for i, c := range cs {
		out[i] = exitreport.Entry{Bytes: c.Bytes, Blocks: c.Blocks, Stack: s.StackText(c.Stack, stackTextFrames)}
	}
	return out
}

// processReport builds pid's report; open are its descriptors left open.
func (s *Session) processReport(pid uint32, open []exitreport.FD) *ProcessReport {
	ps := s.stats(pid)
	sb, sbytes, supd := s.suppressedLive(pid)
	r := &ProcessReport{
		Process: procName(int(pid)), PID: pid, End: time.Now(),
		AllocCalls: ps.allocs, AllocBytes: ps.allocBytes,
		Current: ps.Current() - min(sbytes, ps.Current()), Peak: ps.Peak(), PeakUS: ps.PeakTS(), LeakBlocks: ps.Blocks() - min(sb, ps.Blocks()),
		SuppressedBlocks: sb, SuppressedBytes: sbytes,
		PeakTop: s.entries(ps.PeakTop()), Leaks: s.entries(unsuppressed(ps.Top(s.cfg.PeakTopN+suppressedTop), supd, s.cfg.PeakTopN)), OpenFDs: open,
	}
	if name := s.procNames[pid]; name != "" {
		r.Process = name
	}
	r.Cmd = s.procCmds[pid]
	return r
}

// FinalReports hands the report of every process still running (an
// attach session ended by Ctrl-C) to OnProcessReport.
func (s *Session) FinalReports() {
	if !s.cfg.Reports || s.OnProcessReport == nil {
		return
	}
	for pid := range s.pstats {
		if !s.reported[pid] {
			s.OnProcessReport(s.processReport(pid, s.openFDs(pid, false)))
		}
	}
}

func (s *Session) openFDs(pid uint32, exiting bool) []exitreport.FD {
	if s.fds == nil {
		return nil
	}
	var out []exitreport.FD
	var opens = s.fds.Open(pid)
	if exiting {
		opens = s.fdLeaks(pid)
	}
	for _, o := range opens {
		out = append(out, exitreport.FD{FD: o.FD, Kind: o.Kind.String(), Call: o.Call.String(), Path: o.Path, Stack: s.fdStack(o.Stack)})
	}
	return out
}

// processExit writes the fd leak lines and hands over the report.
func (s *Session) processExit(pid uint32) {
	open := s.openFDs(pid, true)
	if !s.cfg.Reports || s.OnProcessReport == nil {
		return
	}
	if s.reported == nil {
		s.reported = map[uint32]bool{}
	}
	s.reported[pid] = true
	s.OnProcessReport(s.processReport(pid, open))
}

// SnapshotsUntil writes the --interval snapshot of every multiple of
// Config.Interval up to ts (the events' clock) not written yet, each after
// every event before its time: the caller has written every event older
// than ts. One boundary after another, so that a program that runs ahead
// of the writing (the LD_PRELOAD path's converter behind, the end's
// drain) or goes quiet still gets one snapshot per interval of its time.
// Nothing before the first event: the program has no heap yet.
func (s *Session) SnapshotsUntil(ts uint64) {
	if s.cfg.Interval <= 0 || s.snapK == 0 {
		return
	}
	every := uint64(s.cfg.Interval)
	for {
		at := s.cfg.StartNS + s.snapK*every
		if at > ts {
			return
		}
		if len(s.pstats) == 0 {
			// No process has figures yet (an attach to a quiet
			// one): no line to write at any boundary before ts.
			s.snapK = (ts-s.cfg.StartNS)/every + 1
			return
		}
		s.Snapshot(at)
		s.snapK++
	}
}

// Snapshot writes, for each traced process, its current and peak bytes,
// the call stacks holding the most live memory now and its open
// descriptors (--interval), as [memtrace] lines, timed nowNS (the events'
// clock); nothing is signalled.
func (s *Session) Snapshot(nowNS uint64) {
	ts := uint64(0)
	if nowNS > s.cfg.StartNS {
		ts = (nowNS - s.cfg.StartNS) / 1000
	}
	for pid, ps := range s.pstats {
		if s.reported[pid] {
			continue
		}
		opens := s.openFDs(pid, false)
		s.buf = logfmt.AppendSnapshot(s.buf[:0], logfmt.Snapshot{PID: int64(pid), TS: ts, Current: ps.Current(), Peak: ps.Peak(),
			PeakTS: ps.PeakTS(), Blocks: ps.Blocks(), FDs: uint64(len(opens))})
		s.write(s.buf)
		for i, c := range ps.Top(s.cfg.PeakTopN) {
			s.buf = logfmt.AppendSnapshotTop(s.buf[:0], logfmt.SnapshotTop{PID: int64(pid), Rank: int64(i + 1), Bytes: c.Bytes,
				Blocks: c.Blocks, Stack: s.StackText(c.Stack, stackTextFrames)})
			s.write(s.buf)
		}
		for _, o := range opens {
			s.buf = logfmt.AppendSnapshotFD(s.buf[:0], logfmt.SnapshotFD{PID: int64(pid), FD: int64(o.FD), Kind: o.Kind, Call: o.Call, Path: o.Path})
			s.write(s.buf)
		}
	}
	s.Flush()
}

// procName is a process's comm while it runs.
func procName(pid int) string {
	comm, _ := procfs.ReadComm(pid)
	return comm
}

// suppressedTop is how many more of the stacks live at exit a report asks
// for, so that those the built-in suppressions take out leave its top N.
const suppressedTop = 16

// suppressedLive adds up pid's blocks live now that the built-in
// suppressions match, as the report takes them out of the leaks, and
// returns the matcher by stack.
func (s *Session) suppressedLive(pid uint32) (blocks, bytes uint64, suppressed func(stack uint64) bool) {
	c := &leakCounter{s: s, sups: fig.BuiltinSuppressions(), matched: map[uint64]bool{}}
	if p := s.procs[pid]; p != nil {
		for _, b := range p.live {
			if b.v&(filteredBit|inheritedBit) == 0 && c.suppressed(b.stack) {
				blocks++
				bytes = satAdd(bytes, b.v&sizeMask)
			}
		}
	}
	return blocks, bytes, c.suppressed
}

// unsuppressed is cs without the stacks suppressed matches, at most n.
func unsuppressed(cs []StackCost, suppressed func(uint64) bool, n int) []StackCost {
	out := cs[:0:0]
	for _, c := range cs {
		if !suppressed(c.Stack) && len(out) < n {
			out = append(out, c)
		}
	}
	return out
}
