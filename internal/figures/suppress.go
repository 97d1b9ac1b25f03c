package figures

import (
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/internal/units"
)

// Suppression is one leak suppression: LeakSanitizer's leak:PATTERN, as
// heaptrack reads it. PATTERN is matched against every frame's function
// (demangled and as logged) and module path; `*` matches any run of
// characters, a leading `^` or trailing `$` anchors it, otherwise it may
// match anywhere. A built-in one may also require the innermost frame's
// module (Innermost), where the function that allocates has no name to
// match (a stripped library's static constructor).
type Suppression struct {
	Pattern   string
	File      string // "" for a built-in one
	Line      int
	Innermost string // built-in only: a pattern the innermost frame's module base name must match too
	Why       string // built-in only: what it hides, for --print-suppressions
	re, inner *regexp.Regexp
}

// NewSuppression compiles a leak:PATTERN line's pattern.
func NewSuppression(pattern, file string, line int) *Suppression {
	return &Suppression{Pattern: pattern, File: file, Line: line, re: compilePattern(pattern)}
}

// Text is the suppression as --print-suppressions shows it.
func (s *Suppression) Text() string {
	t := "leak:" + s.Pattern
	if s.Innermost != "" {
		t += " (allocated in " + s.Innermost + ")"
	}
	return t
}

// builtin is the list: blocks that system libraries allocate once and
// keep for the life of the process on purpose, which heaptrack hides (it
// calls __libc_freeres and __gnu_cxx::__freeres at exit and suppresses
// the rest by name). memtrace cannot call into the target, so the blocks
// that those functions would free are suppressed by where they came from.
var builtin = []Suppression{
	// libstdc++'s emergency exception pool (eh_alloc.cc), allocated by
	// its static constructor as the loader initialises it; freed only by
	// __gnu_cxx::__freeres. Debian's libstdc++ has no symbol for the
	// constructor, so the stack is matched by the loader's init and the
	// module it allocates in.
	{Pattern: "_dl_init", Innermost: "libstdc++.so*", Why: "libstdc++'s emergency exception pool and other start-up state, allocated by its constructors"},
	// The same under --preload, whose frame-pointer unwinding skips
	// libstdc++'s constructor: the stack starts in the loader itself.
	{Pattern: "_dl_init", Innermost: "ld-linux*.so*", Why: "start-up state of a library constructor whose frame the unwinder skipped (libstdc++'s pool under --preload)"},
	{Pattern: "__gnu_cxx::__freeres", Why: "what libstdc++ frees only in __gnu_cxx::__freeres"},
	{Pattern: "(anonymous namespace)::pool::pool", Why: "libstdc++'s emergency exception pool (with libstdc++'s debug symbols)"},
	// glibc: name service modules, iconv configuration, atexit blocks,
	// time zone and locale data, kept until __libc_freeres.
	{Pattern: "__nss_", Why: "glibc's name service modules and databases"},
	{Pattern: "__gconv_read_conf", Why: "glibc's iconv configuration"},
	{Pattern: "__new_exitfn", Why: "glibc's atexit list"},
	{Pattern: "tzset_internal", Why: "glibc's time zone data"},
	{Pattern: "_nl_load_locale_from_archive", Why: "glibc's locale data"},
	{Pattern: "_nl_intern_locale_data", Why: "glibc's locale data"},
	// The dynamic linker: loaded objects, their dependencies and TLS.
	{Pattern: "_dl_map_object", Why: "the dynamic linker's loaded objects"},
	{Pattern: "_dl_new_object", Why: "the dynamic linker's loaded objects"},
	{Pattern: "_dl_allocate_tls", Why: "threads' TLS blocks, kept in glibc's stack cache"},
	{Pattern: "_dl_check_map_versions", Why: "the dynamic linker's version tables"},
	{Pattern: "dl_open_worker", Why: "what dlopen keeps for a loaded library"},
}

// BuiltinSuppressions returns the built-in list, compiled (a new copy:
// callers count matches on them).
func BuiltinSuppressions() []*Suppression {
	out := make([]*Suppression, len(builtin))
	for k := range builtin {
		s := builtin[k]
		s.re = compilePattern(s.Pattern)
		if s.Innermost != "" {
			s.inner = compilePattern("^" + s.Innermost + "$")
		}
		out[k] = &s
	}
	return out
}

// compilePattern turns a LeakSanitizer pattern into a regexp.
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

// SuppFrame is what a suppression sees of a frame.
type SuppFrame struct {
	Name, Mangled, Module string
}

// Matches reports whether s suppresses a leak with these frames,
// innermost first.
func (s *Suppression) Matches(frames []SuppFrame) bool {
	if len(frames) == 0 {
		return false
	}
	if s.inner != nil && !s.inner.MatchString(path.Base(frames[0].Module)) {
		return false
	}
	for k := range frames {
		f := &frames[k]
		if s.re.MatchString(f.Name) || (f.Mangled != "" && s.re.MatchString(f.Mangled)) ||
			(f.Module != "" && s.re.MatchString(f.Module)) {
			return true
		}
	}
	return false
}

// MatchSuppression returns the first of sups that suppresses a leak with
// these frames, or nil.
func MatchSuppression(sups []*Suppression, frames []SuppFrame) *Suppression {
	for _, s := range sups {
		if s.Matches(frames) {
			return s
		}
	}
	return nil
}

// SuppressedLine is how every reader words the leaks that suppressions
// took out: "suppressed leaks: 72.70K (1 leaks)", the form of the report's
// "total memory leaked" line, so that the report, memview and the closing
// lines read alike.
func SuppressedLine(n int64, bytes uint64) string {
	return "suppressed leaks: " + SuppressedFigure(n, bytes)
}

// SuppressedFigure is SuppressedLine's figure, "72.70K (1 leaks)", for a
// reader that puts the words beside it (the HTML summary's row).
func SuppressedFigure(n int64, bytes uint64) string {
	return units.Bytes(bytes) + " (" + strconv.FormatInt(n, 10) + " leaks)"
}
