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

// trie counts the stacks through each node of the trie of stacks (node 0
// the root, through which they all go).
type trie[T comparable] struct {
	kids  map[trieEdge[T]]int32
	count []int32
}

type trieEdge[T comparable] struct {
	parent int32
	key    T
}

func newTrie[T comparable](stacks [][]T) *trie[T] {
	t := &trie[T]{kids: map[trieEdge[T]]int32{}, count: []int32{int32(len(stacks))}}
	for _, st := range stacks {
		n := int32(0)
		for _, f := range st {
			e := trieEdge[T]{n, f}
			k, ok := t.kids[e]
			if !ok {
				k = int32(len(t.count))
				t.kids[e] = k
				t.count = append(t.count, 0)
			}
			t.count[k]++
			n = k
		}
	}
	return t
}

// walk is the nodes of stack st, one per frame.
func (t *trie[T]) walk(st []T) []int32 {
	out := make([]int32, len(st))
	n := int32(0)
	for j, f := range st {
		n = t.kids[trieEdge[T]{n, f}]
		out[j] = n
	}
	return out
}

// partFrames returns, for each stack, given by its frames' names (as
// small ids) and by its frames' ids, the indexes of the frames its label
// keeps and, for each of them, whether its offset must follow its name.
// A stack is named by its names where they tell it apart: its first
// frame, every frame where its names part from another stack's, up to
// the first frame no other stack shares by name (analysis.DistinctDepth).
// A stack whose names are all another's (one function calling from two
// places) is told apart by its frames: it keeps, besides, every frame
// where its frames part from another's, with its offset where a stack of
// the same names has another frame there, up to the first
// frame no other stack shares; a stack whose frames are all another's
// (or a prefix of one) keeps every frame.
func partFrames(names [][]int32, ids [][]uint32) (kept [][]int, off [][]bool) {
	tn, ti := newTrie(names), newTrie(ids)
	kept = make([][]int, len(names))
	off = make([][]bool, len(names))
	for i := range names {
		wn, wi := tn.walk(names[i]), ti.walk(ids[i])
		stop, family, all := -1, true, false
		for j, n := range wn {
			if tn.count[n] < 2 {
				stop, family = j, false
				break
			}
		}
		if family {
			for j, n := range wi {
				if ti.count[n] < 2 {
					stop = j
					break
				}
			}
			if stop < 0 {
				stop, all = len(wi)-1, true
			}
		}
		var ks []int
		var os []bool
		for j := 0; j <= stop; j++ {
			parentN, parentI := int32(0), int32(0)
			if j > 0 {
				parentN, parentI = wn[j-1], wi[j-1]
			}
			partN := tn.count[wn[j]] < tn.count[parentN]
			partI := family && ti.count[wi[j]] < ti.count[parentI]
			if j == 0 || partN || partI || all {
				// The offset, where a stack of the same names up to here
				// has another frame here.
				ks, os = append(ks, j), append(os, family && ti.count[wi[j]] < tn.count[wn[j]])
			}
		}
		kept[i], off[i] = ks, os
	}
	return kept, off
}

// makeLabel is the label of the frames kept (indexes into names), first
// of all of which parts from other stacks when first is true.
func makeLabel(names []string, kept []int, first bool) siteLabel {
	l := siteLabel{frames: make([]string, len(kept)), gap: make([]bool, len(kept)), part: make([]bool, len(kept))}
	for k, j := range kept {
		l.frames[k] = names[j]
		l.gap[k] = k > 0 && j-kept[k-1] > 1
		l.part[k] = k > 0 || first
	}
	return l
}
