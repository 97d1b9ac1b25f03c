package report

import (
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/memtrace/memtrace/internal/heapprof"
)

// writePprof writes a gzipped profile.proto in Go's heap-profile layout
// through internal/heapprof, the encoder the live endpoint uses too:
// alloc_objects and alloc_space are every allocation, inuse_objects and
// inuse_space what is still live at the end of the log (the text report's
// leaks, the suppressed ones left out, and blocks whose frees were lost), peak_objects and peak_space the blocks live at
// the process's peak. One sample per logged call stack, with its real
// addresses, so that pprof's -lines and -addresses work; with several
// processes each sample carries pid and process labels (string labels).
// No duration: like Go's heap profile it is a snapshot (at the log's end),
// and Parca and Pyroscope would read one with a duration as a delta.
func (r *report) writePprof(w io.Writer) error {
	o := &heapprof.Options{
		Symbols:  r.cache,
		Peak:     true,
		PIDLabel: r.multi(),
		// The run's length, for people and tests, where no server reads it.
		Comments: []string{"memtrace report of " + logNames(r.logs), "runtime " + (time.Duration(r.all.runtime) * time.Microsecond).String()},
	}
	var samples []heapprof.Sample
	o.Main = map[int64]string{}
	for _, s := range r.secs {
		l := s.log
		if l == nil || l.costs == nil {
			continue
		}
		m := l.m
		if l.sites == nil {
			l.sites = r.t.forModel(m)
		}
		for i := range l.costs.Procs {
			pc := &l.costs.Procs[i]
			if pc.Proc != s.proc {
				continue
			}
			for k := range pc.Stacks {
				sc := &pc.Stacks[k]
				id := r.t.site(m, l.sites, sc)
				if r.opt.filterFn != "" && !r.t.hasFunction(id, r.opt.filterFn) {
					continue
				}
				smp := heapprof.Sample{PID: s.pid, Process: s.comm,
					AllocObjects: sc.Calls, AllocBytes: int64(sc.Bytes),
					InuseObjects: sc.Leaks + sc.Unknown, InuseBytes: int64(sc.LeakedBytes + sc.UnknownBytes),
					PeakObjects: sc.PeakCount, PeakBytes: int64(sc.PeakBytes)}
				// A suppressed leak is out of inuse, as it is out of the
				// text report's leaks, so that both give one leaked
				// figure; the sample keeps its other figures and says
				// which suppression took it out.
				if sp := r.supSite[id]; sp != nil && sc.Leaks > 0 {
					smp.InuseObjects -= sc.Leaks
					smp.InuseBytes -= int64(sc.LeakedBytes)
					smp.Labels = map[string]string{"suppressed": sp.Text()}
				}
				if sc.Stack == 0 {
					smp.NoStack = m.OpName(sc.Op)
				} else {
					fs := m.Frames(sc.Stack)
					smp.Stack = make([]heapprof.Frame, len(fs))
					for j, f := range fs {
						fr := m.Frame(f)
						smp.Stack[j] = heapprof.Frame{Module: fr.Module, Symbol: fr.Symbol, Offset: fr.Offset, Addr: fr.Addr}
					}
				}
				if o.Main[s.pid] == "" {
					o.Main[s.pid] = mainModule(s.cmd, smp.Stack)
				}
				if r.multi() && len(r.logs) > 1 {
					if smp.Labels == nil {
						smp.Labels = map[string]string{}
					}
					smp.Labels["log"] = filepath.Base(l.path)
				}
				samples = append(samples, smp)
			}
		}
	}
	return heapprof.Write(w, samples, o)
}

// mainModule is the module of stack whose file the command line names
// (pprof names the profile after it), or "" to let the encoder guess.
func mainModule(cmd string, stack []heapprof.Frame) string {
	argv0, _, _ := strings.Cut(cmd, " ")
	if argv0 == "" {
		return ""
	}
	for _, f := range stack {
		if f.Module != "" && filepath.Base(f.Module) == filepath.Base(argv0) {
			return f.Module
		}
	}
	return ""
}
