package symbols

import (
	"strings"
	"sync"

	"github.com/ianlancetaylor/demangle"
)

// maxDemangledPow bounds a demangled name at 2^24 bytes (16 MiB). Real
// names, even 60 levels of nested templates, are far below it; crafted
// names whose substitutions expand exponentially hit it, and are then
// returned mangled rather than truncated.
const maxDemangledPow = 24

// demangleCacheMax bounds the memo of demangled names; viewers demangle the
// same few thousand names on every redraw.
const demangleCacheMax = 1 << 16

var demangleMemo struct {
	sync.Mutex
	m map[string]string
}

// Demangle turns a C++ (Itanium ABI) or Rust (legacy or v0) symbol name
// into its source form, complete with parameters and template arguments,
// never truncated. A name that is not mangled, or fails to demangle, is
// returned unchanged. A "@plt", "@VERSION" or "@@VERSION" suffix is kept
// after the demangled name.
func Demangle(name string) string {
	if !maybeMangled(name) {
		return name
	}
	demangleMemo.Lock()
	if s, ok := demangleMemo.m[name]; ok {
		demangleMemo.Unlock()
		return s
	}
	demangleMemo.Unlock()

	base, suffix := name, ""
	if i := strings.IndexByte(name, '@'); i > 0 {
		base, suffix = name[:i], name[i:]
	}
	out := name
	if s, err := demangle.ToString(base, demangle.MaxLength(maxDemangledPow)); err == nil && len(s) < 1<<maxDemangledPow && s != "" {
		out = s + suffix
	}

	demangleMemo.Lock()
	if demangleMemo.m == nil || len(demangleMemo.m) >= demangleCacheMax {
		demangleMemo.m = make(map[string]string)
	}
	demangleMemo.m[name] = out
	demangleMemo.Unlock()
	return out
}

func maybeMangled(s string) bool {
	return strings.HasPrefix(s, "_Z") || strings.HasPrefix(s, "_R") || strings.HasPrefix(s, "_GLOBAL_")
}
