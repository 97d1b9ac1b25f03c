package report

import (
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/internal/ranking"
)

// costOf maps a --cost name (heaptrack's --flamegraph-cost-type) to the
// figure it uses (ranking.FlameCosts).
func costOf(name string) (int, bool) {
	for _, c := range ranking.FlameCosts {
		if c.Name == name {
			return int(c.Figure), true
		}
	}
	return 0, false
}

// costNames lists the --cost names: "a, b or c".
func costNames() string {
	var names []string
	for _, c := range ranking.FlameCosts {
		names = append(names, c.Name)
	}
	last := len(names) - 1
	return strings.Join(names[:last], ", ") + " or " + names[last]
}

// costUnit is what a cost counts, for labels.
func costUnit(fig int) string {
	if ranking.Figure(fig).Measure() == ranking.Bytes {
		return "bytes"
	}
	return "calls"
}

// frameText is a frame name as one folded field: no ';' (the separator)
// and no line breaks.
func frameText(s string) string {
	if strings.ContainsAny(s, ";\n\r") {
		s = strings.NewReplacer(";", ":", "\n", " ", "\r", " ").Replace(s)
	}
	return s
}

// foldedFrames is a site's stack, outermost first, as folded fields.
func foldedFrames(s *site) []string {
	frames := s.frTemp()
	if len(frames) == 0 {
		return []string{"[no stack]", frameText(s.r().op)}
	}
	out := make([]string, len(frames))
	for k := range frames {
		out[len(frames)-1-k] = frameText(frames[k].name)
	}
	return out
}

// foldedLines returns "root;...;leaf VALUE" lines of the chosen cost, one
// per call stack (and per process when there are several), sorted.
func (r *report) foldedLines(fig int) []string {
	secs := []*section{r.all}
	if r.multi() {
		secs = r.secs
	}
	var lines []string
	for _, s := range secs {
		prefix := ""
		if r.multi() {
			prefix = frameText(s.title) + ";"
		}
		for id, c := range s.bySite {
			v := figsOf(c)[fig]
			if v <= 0 {
				continue
			}
			lines = append(lines, prefix+strings.Join(foldedFrames(r.t.sites[id]), ";")+" "+strconv.FormatInt(v, 10))
		}
	}
	slices.Sort(lines)
	return lines
}

func (r *report) writeFolded(w io.Writer) error {
	fig, _ := costOf(r.opt.cost)
	for _, l := range r.foldedLines(fig) {
		if _, err := io.WriteString(w, l+"\n"); err != nil {
			return err
		}
	}
	return nil
}
