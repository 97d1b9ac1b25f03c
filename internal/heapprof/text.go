package heapprof

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/google/pprof/profile"
)

// WriteText writes p in the legacy text heap format Go's runtime/pprof
// writes for /debug/pprof/heap?debug=1 (writeHeapInternal): a header of
// the totals, then per sample "inuse_objects: inuse_space [alloc_objects:
// alloc_space] @ return addresses", its labels as Go's goroutine profile
// prints them, and one "#" line per frame, largest in-use first. pprof
// reads it back (its legacy heap parser); people read it in a browser.
func WriteText(w io.Writer, p *profile.Profile) error {
	idx := map[string]int{}
	for i, st := range p.SampleType {
		idx[st.Type] = i
	}
	var col [4]int
	for k, name := range []string{"inuse_objects", "inuse_space", "alloc_objects", "alloc_space"} {
		i, ok := idx[name]
		if !ok {
			return fmt.Errorf("write text heap profile: no %s sample type (memtrace's bug: please report it)", name)
		}
		col[k] = i
	}
	vals := func(s *profile.Sample) [4]int64 {
		return [4]int64{s.Value[col[0]], s.Value[col[1]], s.Value[col[2]], s.Value[col[3]]}
	}
	samples := slices.Clone(p.Sample)
	slices.SortStableFunc(samples, func(a, b *profile.Sample) int {
		va, vb := vals(a)[1], vals(b)[1]
		switch {
		case va > vb:
			return -1
		case va < vb:
			return 1
		}
		return 0
	})
	var total [4]int64
	for _, s := range samples {
		v := vals(s)
		for k := range total {
			total[k] += v[k]
		}
	}
	// As Go's: equal in-use and allocated totals would make pprof read a
	// two-column profile (objects and space, no alloc_*).
	if total[1] == total[3] {
		total[3]++
	}
	bw := bufio.NewWriter(w)
	tw := tabwriter.NewWriter(bw, 1, 8, 1, '\t', 0)
	// heap/2 is a period of 1 to pprof's reader: the figures are already
	// estimates (under --sample), not to be scaled again.
	fmt.Fprintf(tw, "heap profile: %d: %d [%d: %d] @ heap/2\n", total[0], total[1], total[2], total[3])
	for _, s := range samples {
		v := vals(s)
		fmt.Fprintf(tw, "%d: %d [%d: %d] @", v[0], v[1], v[2], v[3])
		for _, l := range s.Location {
			if l.Address != 0 {
				// The return address, as Go's: pprof's reader subtracts one.
				fmt.Fprintf(tw, " %#x", l.Address+1)
			}
		}
		fmt.Fprintf(tw, "\n")
		if len(s.Label) > 0 {
			keys := make([]string, 0, len(s.Label))
			for k := range s.Label {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			parts := make([]string, 0, len(keys))
			for _, k := range keys {
				for _, v := range s.Label[k] {
					parts = append(parts, strconv.Quote(k)+":"+strconv.Quote(v))
				}
			}
			fmt.Fprintf(tw, "# labels: {%s}\n", strings.Join(parts, ", "))
		}
		for _, l := range s.Location {
			addr := ""
			if l.Address != 0 {
				addr = fmt.Sprintf("%#x", l.Address)
			}
			for _, ln := range l.Line {
				where := ""
				switch {
				case ln.Function != nil && ln.Function.Filename != "":
					where = ln.Function.Filename + ":" + strconv.FormatInt(ln.Line, 10)
				case l.Mapping != nil:
					where = l.Mapping.File
				}
				name := ""
				if ln.Function != nil {
					name = ln.Function.Name
				}
				fmt.Fprintf(tw, "#\t%s\t%s\t%s\n", addr, name, where)
			}
		}
		fmt.Fprintf(tw, "\n")
	}
	if len(p.Comments) > 0 {
		fmt.Fprintf(tw, "# memtrace\n")
		for _, c := range p.Comments {
			fmt.Fprintf(tw, "# %s\n", strings.ReplaceAll(c, "\n", " "))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write text heap profile: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write text heap profile: %w", err)
	}
	return nil
}
