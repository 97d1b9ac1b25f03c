package report

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// massifSnapshots is how many evenly spaced snapshots the massif file has
// (valgrind's massif keeps at most 100); the exact peak is added.
const massifSnapshots = 100

// spread is end*k/d without overflow, for k <= d.
func spread(end uint64, k, d int) uint64 {
	return end/uint64(d)*uint64(k) + end%uint64(d)*uint64(k)/uint64(d)
}

type massifNode struct {
	text  string
	bytes uint64
	kids  map[string]*massifNode
}

func (n *massifNode) kid(text string) *massifNode {
	if n.kids == nil {
		n.kids = map[string]*massifNode{}
	}
	k := n.kids[text]
	if k == nil {
		k = &massifNode{text: text}
		n.kids[text] = k
	}
	return k
}

func (r *report) massifText(f *frameInfo) string {
	r.resolve(f)
	// ms_print drops everything after a '#'.
	name := strings.ReplaceAll(f.name, "#", " ")
	switch {
	case f.file != "":
		return "0x0: " + name + " (" + f.file + ":" + strconv.Itoa(f.line) + ")"
	case f.module != "":
		return "0x0: " + name + " (in " + f.module + ")"
	}
	return "0x0: " + name
}

// timed returns the sections with allocations, whose live bytes can be
// drawn over time, and the last time stamp of their logs.
func (r *report) timed() (secs []*section, end uint64) {
	for _, s := range r.secs {
		if s.log != nil && s.total.Calls > 0 {
			secs = append(secs, s)
			end = max(end, s.log.m.MaxTS)
		}
	}
	return secs, end
}

// writeMassif writes valgrind massif's format, which ms_print and
// massif-visualizer read: live heap bytes at evenly spaced times of the
// logs' clock (ms since tracing started, summed over the processes), every
// --massif-detailed-freq'th snapshot with its tree of allocating stacks,
// and the peak's snapshot with the stacks live at the peak.
func (r *report) writeMassif(w io.Writer) error {
	secs, end := r.timed()
	type snap struct {
		ts    uint64
		bytes uint64
		peak  bool
	}
	var snaps []snap
	if len(secs) > 0 {
		times := make([]uint64, massifSnapshots)
		for k := range times {
			times[k] = spread(end, k, massifSnapshots-1)
		}
		total := make([]uint64, len(times))
		for _, s := range secs {
			for k, v := range s.log.m.LiveSeries(s.proc, times) {
				total[k] += v
			}
		}
		for k := range times {
			snaps = append(snaps, snap{ts: times[k], bytes: total[k]})
		}
		if len(secs) == 1 {
			// The exact peak, in time order among the samples.
			s := secs[0]
			p := snap{ts: s.peakTS, bytes: s.log.costs.Procs[0].PeakBytes, peak: true}
			for _, pc := range s.log.costs.Procs {
				if pc.Proc == s.proc {
					p.bytes = pc.PeakBytes
				}
			}
			at, _ := slices.BinarySearchFunc(snaps, p.ts, func(a snap, t uint64) int { return cmp.Compare(a.ts, t+1) })
			snaps = slices.Insert(snaps, at, p)
		} else {
			best := 0
			for k := range snaps {
				if snaps[k].bytes > snaps[best].bytes {
					best = k
				}
			}
			snaps[best].peak = true
		}
	}
	cmd := r.all.cmd
	if cmd == "" {
		cmd = logNames(r.logs)
	}
	fmt.Fprintf(w, "desc: memtrace report of %s\ncmd: %s\ntime_unit: ms\n", logNames(r.logs), cmd)
	freq := r.opt.massifDetailed
	for j, sn := range snaps {
		kind := "empty"
		switch {
		case sn.peak:
			kind = "peak"
		case freq > 0 && j%freq == 0:
			kind = "detailed"
		}
		fmt.Fprintf(w, "#-----------\nsnapshot=%d\n#-----------\ntime=%s\nmem_heap_B=%d\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=%s\n",
			j, strconv.FormatFloat(float64(sn.ts)/1000, 'f', 3, 64), sn.bytes, kind)
		if kind == "empty" {
			continue
		}
		root := r.massifTree(secs, sn.ts, sn.peak && len(secs) == 1)
		r.writeMassifNode(w, root, 0, sn.bytes)
	}
	return nil
}

// massifTree is the tree of stacks live at time ts (or at the peak), the
// allocating function's caller first, as massif draws it.
func (r *report) massifTree(secs []*section, ts uint64, atPeak bool) *massifNode {
	root := &massifNode{text: "(heap allocation functions) malloc/new/new[], --alloc-fns, etc."}
	bySite := map[int32]uint64{}
	for _, s := range secs {
		m := s.log.m
		for i := range m.TS {
			id := uint32(i)
			if m.Threads[m.Thread[i]].Proc != s.proc {
				continue
			}
			if atPeak {
				if !s.log.costs.AtPeak(id) {
					continue
				}
			} else if !m.LiveAt(id, ts) {
				continue
			}
			site := r.t.siteOfAlloc(m, s.log.sites, id)
			if s.bySite[site] == nil {
				continue // left out by --filter-bt-function
			}
			bySite[site] += m.Size[i]
		}
	}
	for id, b := range bySite {
		st := r.t.sites[id]
		root.bytes += b
		n := root
		frames := st.frTemp()
		if len(frames) == 0 {
			n = n.kid("0x0: " + st.label())
			n.bytes += b
			continue
		}
		for k := range frames {
			n = n.kid(r.massifText(&frames[k]))
			n.bytes += b
		}
	}
	return root
}

func (r *report) writeMassifNode(w io.Writer, n *massifNode, depth int, total uint64) {
	kids := make([]*massifNode, 0, len(n.kids))
	for _, k := range n.kids {
		kids = append(kids, k)
	}
	slices.SortFunc(kids, func(a, b *massifNode) int {
		if c := cmp.Compare(b.bytes, a.bytes); c != 0 {
			return c
		}
		return cmp.Compare(a.text, b.text)
	})
	th := r.opt.massifThreshold
	var small []*massifNode
	shown := kids[:0:0]
	for _, k := range kids {
		if total > 0 && float64(k.bytes)*100 < th*float64(total) {
			small = append(small, k)
		} else {
			shown = append(shown, k)
		}
	}
	nk := len(shown)
	if len(small) > 0 {
		nk++
	}
	indent := strings.Repeat(" ", depth)
	fmt.Fprintf(w, "%sn%d: %d %s\n", indent, nk, n.bytes, n.text)
	for _, k := range shown {
		r.writeMassifNode(w, k, depth+1, total)
	}
	if len(small) > 0 {
		var b uint64
		for _, k := range small {
			b += k.bytes
		}
		fmt.Fprintf(w, "%s n0: %d in %d places, all below massif's threshold (%s%%)\n", indent, b, len(small), strconv.FormatFloat(th, 'f', 2, 64))
	}
}
