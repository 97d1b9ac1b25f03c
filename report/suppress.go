package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/internal/asuser"
	"github.com/memtrace/memtrace/internal/ranking"
)

// suppression is one leak:PATTERN line (analysis.Suppression: the one
// matcher the report and memview share) or a built-in one, with what it
// matched over all sections, for --print-suppressions.
type suppression struct {
	*analysis.Suppression
	leaks int64
	bytes uint64
	sites int
}

// readSuppressions reads suppression files. Lines other than leak: ones
// (LeakSanitizer's other kinds) are skipped with a warning; # starts a
// comment.
func readSuppressions(paths []string, warn io.Writer) ([]*suppression, error) {
	var out []*suppression
	for _, p := range paths {
		f, err := asuser.Open(p)
		if err != nil {
			return nil, fmt.Errorf("open the suppressions: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		n := 0
		for sc.Scan() {
			n++
			line := strings.TrimSpace(sc.Text())
			if i := strings.IndexByte(line, '#'); i >= 0 {
				line = strings.TrimSpace(line[:i])
			}
			if line == "" {
				continue
			}
			kind, pat, ok := strings.Cut(line, ":")
			pat = strings.TrimSpace(pat)
			if !ok || strings.TrimSpace(kind) != "leak" || pat == "" {
				fmt.Fprintf(warn, "memtrace report: %s:%d: not a leak:PATTERN line, skipped\n", p, n)
				continue
			}
			out = append(out, &suppression{Suppression: analysis.NewSuppression(pat, p, n)})
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read the suppressions %s: %w", p, err)
		}
	}
	return out, nil
}

// builtinSuppressions is analysis's built-in list, unless turned off.
func builtinSuppressions(off bool) []*suppression {
	if off {
		return nil
	}
	var out []*suppression
	for _, b := range analysis.BuiltinSuppressions() {
		out = append(out, &suppression{Suppression: b})
	}
	return out
}

// matchSite returns the first suppression matching the site's frames, or
// nil. Inlined functions count as frames of their own.
func matchSite(sups []*suppression, s *site) *suppression {
	var fr []analysis.SuppFrame
	frames := s.frTemp()
	for k := range frames {
		f := &frames[k]
		if n := len(f.inl); n > 1 {
			for _, c := range f.inl[:n-1] {
				fr = append(fr, analysis.SuppFrame{Name: c.name, Module: f.module})
			}
		}
		fr = append(fr, analysis.SuppFrame{Name: f.name, Mangled: f.mangled, Module: f.module})
	}
	for _, sp := range sups {
		if sp.Matches(fr) {
			return sp
		}
	}
	return nil
}

// suppressed is what suppressions took out of one section.
type suppressed struct {
	leaks int64
	bytes uint64
}

// applySuppressions takes the leaks of matching sites out of every section
// (their leak figures and totals) and counts them on the suppression; it
// returns those figures by section, and the suppression of each site
// that had leaks (nil where none matched), for the pprof export.
func applySuppressions(t *siteTable, sups []*suppression, secs []*section) (map[*section]suppressed, map[int32]*suppression) {
	out := map[*section]suppressed{}
	matched := map[int32]*suppression{}
	if len(sups) == 0 {
		return out, matched
	}
	for _, s := range secs {
		for id, c := range s.bySite {
			if c.Leaks == 0 {
				continue
			}
			sp, ok := matched[id]
			if !ok {
				sp = matchSite(sups, t.sites[id])
				matched[id] = sp
				if sp != nil {
					sp.sites++
				}
			}
			if sp == nil {
				continue
			}
			sp.leaks += c.Leaks
			sp.bytes += c.LeakedBytes
			o := out[s]
			o.leaks += c.Leaks
			o.bytes += c.LeakedBytes
			out[s] = o
			s.total.Leaks -= c.Leaks
			s.total.LeakedBytes -= c.LeakedBytes
			// A new value: the old one may be shared (section.add).
			n := *c
			n.Leaks, n.LeakedBytes, n.Unknown, n.UnknownBytes = 0, 0, 0, 0
			n.Largest[ranking.Leaked] = 0
			s.bySite[id] = &n
		}
	}
	return out, matched
}
