package analysis

import "strings"

// How the report names frames and stacks for a reader: heaptrack_print's
// shortened templates and stacks that stop at main, and the label that
// tells one call stack from the others shown with it. The text report and
// the HTML page share these rules.

// ShortenTemplates drops the arguments of C++ templates, as
// heaptrack_print's --shorten-templates does:
// "std::vector<int, std::allocator<int> >::push_back(int const&)" becomes
// "std::vector<>::push_back(int const&)". The angle brackets of
// operator<, operator<<, operator> and operator>> are kept.
func ShortenTemplates(name string) string {
	if strings.IndexByte(name, '<') < 0 {
		return name
	}
	var b strings.Builder
	b.Grow(len(name))
	depth := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '<' || c == '>' {
			// An operator's own brackets are not a template's.
			out := b.String()
			if strings.HasSuffix(out, "operator") || strings.HasSuffix(out, "operator"+string(c)) {
				if depth == 0 {
					b.WriteByte(c)
				}
				continue
			}
		}
		switch c {
		case '<':
			depth++
			if depth == 1 {
				b.WriteByte(c)
			}
			continue
		case '>':
			if depth > 0 {
				depth--
				if depth == 0 {
					b.WriteByte(c)
				}
				continue
			}
		}
		if depth == 0 {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// stopFunctions end a stack for a reader, themselves shown: heaptrack_print's
// stop list.
var stopFunctions = map[string]bool{
	"main": true,
	"__static_initialization_and_destruction_0": true,
}

// startupFunctions are the C library's start-up code and thread
// trampolines: what calls main or a thread's start routine, never the
// program's own code. A stack is shown up to the frame they call.
var startupFunctions = map[string]bool{
	"__libc_start_call_main": true,
	"__libc_start_main":      true,
	"__libc_start_main_impl": true,
	"_start":                 true,
	"start_thread":           true,
	"clone3":                 true,
	"__clone3":               true,
	"clone":                  true,
	"__clone":                true,
}

// StackEnd is how many of a stack's frames (names innermost first) a
// reader needs: up to main (heaptrack_print's rule, main included) or up
// to the frame the C library's start-up code or thread trampoline called
// (a thread's start routine, or an unnamed main). cut reports that frames
// were left out. A stack of start-up code only is kept whole.
func StackEnd(names []string) (n int, cut bool) {
	for k, name := range names {
		if stopFunctions[name] {
			return k + 1, k+1 < len(names)
		}
		if startupFunctions[name] && k > 0 {
			return k, true
		}
	}
	return len(names), false
}

// DistinctLabels names each stack (frame names, innermost first) by its
// first frame and, where other stacks share it, the frames that tell it
// apart: "alloc ← caller" when the caller does, "alloc ← … ← frame" with
// the first frame at which it differs from every other stack, and the
// frames between where that short form would name two stacks alike. A
// stack that is a prefix of another is named by all its frames; an empty
// one gets "".
func DistinctLabels(stacks [][]string) []string {
	deep := DistinctDepth(stacks)
	out := make([]string, len(stacks))
	for k, st := range stacks {
		out[k] = DistinctLabel(st, deep[k])
	}
	seen := map[string]int{}
	for _, l := range out {
		seen[l]++
	}
	for k, st := range stacks {
		if d := deep[k]; seen[out[k]] > 1 && d >= 2 && d < len(st) {
			out[k] = strings.Join(st[:d+1], " ← ")
		}
	}
	return out
}
