package viewer

import (
	"regexp"
	"slices"
	"strings"
)

// Group labels that tell every group apart. analysis.DistinctLabel names a
// site "alloc ← … ← frame d" by the first frame no other site shares, and
// elides the frames between; but two sites that part at a frame in that
// gap and meet again on the same names (sqlite3's ParserAlloc and
// VdbeMakeReady, both through one wrapper and both called from one deeper
// frame) then read alike. A label here keeps, besides the allocating
// function and that first unshared frame, every frame at which its stack
// parts from another one: each pair of sites then shows the names at which
// they part in the same place of their labels.

// siteLabel is a group's label: the frames kept, innermost first, and
// before each whether frames were elided there.
type siteLabel struct {
	frames []string
	gap    []bool
	part   []bool // the stack parts from another at this frame
}

func (l siteLabel) String() string {
	var b strings.Builder
	for k, f := range l.frames {
		switch {
		case k == 0 && l.gap[k]:
			b.WriteString("… ← ")
		case k == 0:
		case l.gap[k]:
			b.WriteString(" ← … ← ")
		default:
			b.WriteString(" ← ")
		}
		b.WriteString(f)
	}
	return b.String()
}

// fit is the label in at most w columns where it can be, giving way
// where it tells least: first a shared library's version (libx.so.0.8.6+0x1
// reads libx+0x1), then an allocating function that all the others share,
// then the frames kept between the first and the last (the one that tells
// it apart), from the last backwards, so that both ends stay visible.
func (l siteLabel) fit(w int) string {
	s := l.String()
	if runeLen(s) <= w {
		return s
	}
	l = siteLabel{frames: slices.Clone(l.frames), gap: slices.Clone(l.gap), part: slices.Clone(l.part)}
	for k, f := range l.frames {
		l.frames[k] = soVersion.ReplaceAllString(f, "+0x")
	}
	if s = l.String(); runeLen(s) <= w {
		return s
	}
	if len(l.frames) > 1 && !l.part[0] {
		l = siteLabel{frames: l.frames[1:], gap: l.gap[1:], part: l.part[1:]}
		l.gap[0] = true
		s = l.String()
	}
	for runeLen(s) > w && len(l.frames) > 2 {
		n := len(l.frames)
		l = siteLabel{
			frames: append(l.frames[:n-2:n-2], l.frames[n-1]),
			gap:    append(l.gap[:n-2:n-2], true),
			part:   append(l.part[:n-2:n-2], l.part[n-1]),
		}
		s = l.String()
	}
	return s
}

// soVersion is a shared library's suffix in a frame named by module and
// offset.
var soVersion = regexp.MustCompile(`\.so(\.[0-9]+)*\+0x`)

// partFrames returns, for each stack (frame keys, innermost first), the
// indexes of the frames its label keeps and, for each of them, whether
// the stack parts there from another that shares its frames up to it.
// The frames kept are the first, every frame where it parts from another,
// up to the first frame no other stack shares (analysis.DistinctDepth);
// every frame of a stack that is all another's (or a prefix of one): whole.
func partFrames[T comparable](stacks [][]T) (kept [][]int, parts [][]bool, whole []bool) {
	// Keys become small ids once, so that the walks below hash numbers.
	type edge struct{ parent, key int32 }
	keys := map[T]int32{}
	idStacks := make([][]int32, len(stacks))
	for i, st := range stacks {
		ids := make([]int32, len(st))
		for j, f := range st {
			id, ok := keys[f]
			if !ok {
				id = int32(len(keys))
				keys[f] = id
			}
			ids[j] = id
		}
		idStacks[i] = ids
	}
	kids := map[edge]int32{}
	count := []int32{int32(len(stacks))} // per trie node: stacks through it; node 0 the root
	for _, st := range idStacks {
		n := int32(0)
		for _, f := range st {
			e := edge{n, f}
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
	kept = make([][]int, len(stacks))
	parts = make([][]bool, len(stacks))
	whole = make([]bool, len(stacks))
	for i, st := range idStacks {
		n := int32(0)
		all := true
		var ks []int
		var ps []bool
		for j, f := range st {
			k := kids[edge{n, f}]
			part := count[k] < count[n]
			if j == 0 || part {
				ks, ps = append(ks, j), append(ps, part)
			}
			n = k
			if count[k] < 2 {
				all = false
				break
			}
		}
		if all {
			ks, ps = ks[:0], ps[:0]
			for j := range st {
				ks, ps = append(ks, j), append(ps, false)
			}
			// The offsets that tell same-named stacks apart go where the
			// stack parts, and a whole stack parts nowhere.
			n = 0
			for j, f := range st {
				k := kids[edge{n, f}]
				ps[j] = count[k] < count[n]
				n = k
			}
		}
		kept[i], parts[i], whole[i] = ks, ps, all
	}
	return kept, parts, whole
}

// makeLabel is the label of the frames kept (indexes into names) and
// where they part from other stacks.
func makeLabel(names []string, kept []int, parts []bool) siteLabel {
	l := siteLabel{frames: make([]string, len(kept)), gap: make([]bool, len(kept)), part: parts}
	for k, j := range kept {
		l.frames[k] = names[j]
		l.gap[k] = k > 0 && j-kept[k-1] > 1
	}
	return l
}
