package analysis

import (
	"slices"
	"testing"
)

// TestDistinctLabels: sites through one wrapper are named by the caller
// that tells them apart, as the report's charts name them.
func TestDistinctDepthAndLabel(t *testing.T) {
	stacks := [][]string{
		{"wrap", "a", "main"},            // 0: differs at a
		{"wrap", "b", "x", "main"},       // 1: shares wrap←b with 2, differs at x
		{"wrap", "b", "y", "main"},       // 2: differs at y
		{"own", "main"},                  // 3: its own allocator
		{"wrap", "a"},                    // 4: a prefix of 0: all of it
		{"dup", "main"}, {"dup", "main"}, // 5, 6: the same names
	}
	d := DistinctDepth(stacks)
	if want := []int{2, 2, 2, 0, 2, 2, 2}; !slices.Equal(d, want) {
		t.Fatalf("depths %v, want %v", d, want)
	}
	var got []string
	for k, st := range stacks {
		got = append(got, DistinctLabel(st, d[k]))
	}
	want := []string{"wrap ← … ← main", "wrap ← … ← x", "wrap ← … ← y", "own", "wrap ← a", "dup ← main", "dup ← main"}
	if !slices.Equal(got, want) {
		t.Fatalf("labels\n%q\nwant\n%q", got, want)
	}
	if d := DistinctDepth([][]string{{"wrap", "a"}, {"wrap", "b"}}); !slices.Equal(d, []int{1, 1}) {
		t.Fatalf("caller depths %v", d)
	}
	if l := DistinctLabel([]string{"wrap", "b"}, 1); l != "wrap ← b" {
		t.Fatalf("caller label %q", l)
	}
}
