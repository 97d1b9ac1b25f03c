package report

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/internal/asuser"
)

// suppression is one leak:PATTERN line, as LeakSanitizer and heaptrack
// read them: PATTERN is matched against every frame's function (demangled
// and as logged) and module; `*` matches any run of characters, a leading
// `^` or trailing `$` anchors it, and otherwise it may match anywhere.
type suppression struct {
	pattern string
	re      *regexp.Regexp
	file    string
	line    int
	// What it matched, over all sections, for --print-suppressions.
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
			out = append(out, &suppression{pattern: pat, re: compilePattern(pat), file: p, line: n})
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read the suppressions %s: %w", p, err)
		}
	}
	return out, nil
}

// compilePattern turns a LeakSanitizer pattern into a regexp: `*` matches
// any run of characters, a leading `^` or trailing `$` anchors it, and
// otherwise it may match anywhere.
func compilePattern(pat string) *regexp.Regexp {
	var b strings.Builder
	if strings.HasPrefix(pat, "^") {
		b.WriteByte('^')
		pat = pat[1:]
	}
	end := strings.HasSuffix(pat, "$")
	if end {
		pat = pat[:len(pat)-1]
	}
	for k, part := range strings.Split(pat, "*") {
		if k > 0 {
			b.WriteString(".*")
		}
		b.WriteString(regexp.QuoteMeta(part))
	}
	if end {
		b.WriteByte('$')
	}
	return regexp.MustCompile(b.String())
}

// matchSite returns the first suppression matching one of the site's
// frames, or nil.
func matchSite(sups []*suppression, s *site) *suppression {
	for _, sp := range sups {
		for k := range s.frames {
			f := &s.frames[k]
			if sp.re.MatchString(f.name) || (f.mangled != "" && sp.re.MatchString(f.mangled)) ||
				(f.module != "" && sp.re.MatchString(f.module)) {
				return sp
			}
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
// (their leak figures and totals) and counts them on the suppression.
func applySuppressions(t *siteTable, sups []*suppression, secs []*section) map[*section]suppressed {
	out := map[*section]suppressed{}
	if len(sups) == 0 {
		return out
	}
	matched := map[int32]*suppression{}
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
			*c = analysis.CostFigures{Calls: c.Calls, Bytes: c.Bytes, Temporary: c.Temporary, TempBytes: c.TempBytes, PeakCount: c.PeakCount, PeakBytes: c.PeakBytes}
		}
	}
	return out
}
