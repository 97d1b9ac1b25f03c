package ranking

import "testing"

// Measure, Class and Merge take a figure apart and Of puts it together;
// every figure has a name of its own.
func TestFigures(t *testing.T) {
	names := map[string]bool{}
	for f := range NumFigures {
		if g := Of(f.Measure(), f.Class(), f.Merge()); g != f {
			t.Errorf("figure %d: Of gives %d", f, g)
		}
		if f.Class() >= NumClasses || (f.Merge() == Max && f.Measure() != Bytes) {
			t.Errorf("figure %q: class %d merge %d measure %d", f.Name(), f.Class(), f.Merge(), f.Measure())
		}
		if f.Name() == "" || names[f.Name()] {
			t.Errorf("figure %d: name %q empty or another's", f, f.Name())
		}
		names[f.Name()] = true
		if f.Entry() != (f.Merge() == Sum) {
			t.Errorf("figure %q: every entry has the summed figures, and those only", f.Name())
		}
	}
	if NumFigures.Name() != "" {
		t.Error("a name past the figures")
	}
}
