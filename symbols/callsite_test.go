package symbols

import (
	"slices"
	"testing"
)

// A frame in inlined code is its calls, innermost first, the physical
// function last and named as the reader names it; a frame without a line
// is at its offset.
func TestCalls(t *testing.T) {
	chain := []SourceFrame{
		{Function: "_ZN5Cache3putEi", File: "/src/leaky.cpp", Line: 15},
		{Function: "", File: "/src/leaky.cpp", Line: 20},
		{Function: "main", File: "/src/leaky.cpp", Line: 27},
	}
	var got []string
	for _, c := range Calls(chain, "main", "+0x40") {
		got = append(got, c.Label())
	}
	if want := []string{"Cache::put(int) leaky.cpp:15", "?? leaky.cpp:20", "main leaky.cpp:27"}; !slices.Equal(got, want) {
		t.Errorf("inline chain: %q, want %q", got, want)
	}
	for _, tc := range []struct {
		chain []SourceFrame
		off   string
		want  string
	}{
		{[]SourceFrame{{Function: "f", File: "/a/f.c", Line: 3}}, "+0x40", "f f.c:3"},
		{nil, "+0x40", "f+0x40"},
		{[]SourceFrame{{Function: "f"}}, " (libx.so+0x40)", "f (libx.so+0x40)"},
		{nil, "", "f"},
	} {
		c := Calls(tc.chain, "f", tc.off)
		if len(c) != 1 || c[0].Label() != tc.want {
			t.Errorf("Calls(%v, f, %q) = %+v, want one call %q", tc.chain, tc.off, c, tc.want)
		}
	}
}
