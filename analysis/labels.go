package analysis

import "strings"

// The rule that names call sites apart, shared by memview's group list and
// the report's charts: a site is named by its allocating function and,
// where other sites share it, by the first frame at which its stack
// differs from every other's ("alloc ← … ← caller"). Naming every site by
// its innermost frame alone gives a library's many call sites, all through
// its one malloc wrapper, the same name.

// DistinctDepth returns, for each stack (frame names, innermost first),
// the index of the first frame that no other stack shares with it frame
// by frame from the innermost: 0 when its allocating function is its own,
// len(stacks[k]) when the whole stack is another's (or a prefix of one).
// One pass over a trie of the stacks, so that thousands of sites cost no
// more than their frames.
// Frames may be given by name or by id (a frame id: the same names at
// different offsets).
func DistinctDepth[T comparable](stacks [][]T) []int {
	type edge struct {
		parent int32
		name   int32
	}
	names := map[T]int32{}
	kids := map[edge]int32{}
	count := []int32{0} // per trie node: stacks through it; node 0 the root
	for _, st := range stacks {
		n := int32(0)
		for _, f := range st {
			id, ok := names[f]
			if !ok {
				id = int32(len(names))
				names[f] = id
			}
			e := edge{n, id}
			k, ok := kids[e]
			if !ok {
				k = int32(len(count))
				kids[e] = k
				count = append(count, 0)
			}
			count[k]++
			n = k
		}
	}
	out := make([]int, len(stacks))
	for i, st := range stacks {
		n, d := int32(0), 0
		for _, f := range st {
			n = kids[edge{n, names[f]}]
			if count[n] < 2 {
				break
			}
			d++
		}
		out[i] = d
	}
	return out
}

// DistinctLabel is the name of a stack (innermost first) whose first
// distinct frame is d (DistinctDepth): its allocating function alone, with
// its caller when that tells it apart, "alloc ← … ← frame d" when a deeper
// frame does, or the whole stack when none does.
func DistinctLabel(stack []string, d int) string {
	switch {
	case len(stack) == 0:
		return ""
	case d == 0:
		return stack[0]
	case d >= len(stack):
		return strings.Join(stack, " ← ")
	case d == 1:
		return stack[0] + " ← " + stack[1]
	}
	return stack[0] + " ← … ← " + stack[d]
}

// StackNames is stack s's frame names for display (FrameName), innermost
// first.
func (m *Model) StackNames(s uint32) []string {
	fr := m.Frames(s)
	out := make([]string, len(fr))
	for k, f := range fr {
		out[k] = m.FrameName(f)
	}
	return out
}
