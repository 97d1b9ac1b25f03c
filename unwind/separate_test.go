package unwind

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/unwind/unwindtest"
)

// TestSeparateDebugFrame: a binary whose CFI is only in its separate debug
// file's .debug_frame gets its rows from there, through
// Options.SeparateDebug; a binary with its own .eh_frame never asks.
func TestSeparateDebugFrame(t *testing.T) {
	dir := t.TempDir()
	bin, dbg := unwindtest.SeparateDebugOnly(t, dir)
	asked := 0
	opts := &Options{SeparateDebug: func() (io.ReaderAt, int64, func()) {
		asked++
		f, err := os.Open(dbg)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		return f, st.Size(), func() { f.Close() }
	}}
	plain, err := BuildTableFile(bin, nil)
	if err != nil {
		t.Fatal(err)
	}
	with, err := BuildTableFile(bin, opts)
	if err != nil {
		t.Fatal(err)
	}
	if asked != 1 || !with.Stats.SeparateDebug || with.Stats.DebugFrameFDEs == 0 || plain.Stats.SeparateDebug {
		t.Fatalf("asked %d times, separate %v with %d .debug_frame FDEs; without: separate %v", asked, with.Stats.SeparateDebug, with.Stats.DebugFrameFDEs, plain.Stats.SeparateDebug)
	}
	if with.Stats.Rows <= plain.Stats.Rows {
		t.Errorf("rows with the debug file %d, without %d", with.Stats.Rows, plain.Stats.Rows)
	}
	// A binary whose own .eh_frame covers its code (more of it than
	// the C runtime's start-up, which has none): the debug file is never
	// opened.
	asked = 0
	full, fullSrc := filepath.Join(dir, "full"), filepath.Join(dir, "full.c")
	var b strings.Builder
	for i := range 200 {
		fmt.Fprintf(&b, "__attribute__((noinline)) int f%d(int x) { return x * %d + f%d(x - 1); }\n", i+1, i+3, i)
	}
	os.WriteFile(fullSrc, []byte("int f0(int x) { return x; }\n"+b.String()+"int main(int c, char **v) { (void)v; return f200(c); }\n"), 0o644)
	if out, err := exec.Command("gcc", "-O2", "-o", full, fullSrc).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v %s", err, out)
	}
	if _, err := BuildTableFile(full, opts); err != nil || asked != 0 {
		t.Errorf("a binary with .eh_frame: %v, the debug file asked for %d times", err, asked)
	}
}
