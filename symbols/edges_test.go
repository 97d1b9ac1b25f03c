package symbols

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// An unsized label at the end of the code and a trampoline placed after
// padding, as glibc's _fini and __start_context are.
const edgesSrc = `
	.text
	.globl sized_fn
	.type sized_fn, @function
sized_fn:
	nop
	ret
	.size sized_fn, . - sized_fn
	.p2align 4
	.globl tramp
	.type tramp, @function
tramp:
	hlt
	.size tramp, . - tramp
	.section .fini, "ax", @progbits
	.globl last_label
	.type last_label, @function
last_label:
	ret
	.data
	.globl data_word
data_word:
	.quad 1
	.bss
	.globl bss_buf
bss_buf:
	.zero 4096
	.text
	.globl _start
	.type _start, @function
_start:
	ret
	.size _start, . - _start
`

func buildEdges(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "edges.s")
	if err := os.WriteFile(src, []byte(edgesSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "edges")
	if out, err := exec.Command("gcc", "-nostdlib", "-no-pie", "-o", bin, src).CombinedOutput(); err != nil {
		t.Skipf("gcc: %v\n%s", err, out)
	}
	return bin
}

func symAddr(t *testing.T, bin, name string) uint64 {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ss, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if s.Name == name {
			return s.Value
		}
	}
	t.Fatalf("no symbol %s in %s", name, bin)
	return 0
}

// TestUnsizedSymbolEndsWithItsSection: an address in .data or .bss past
// the last code label (unsized, like _fini) is no offset into that label.
func TestUnsizedSymbolEndsWithItsSection(t *testing.T) {
	bin := buildEdges(t)
	c := NewCache(nil)
	defer c.Close()
	m, err := c.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	last := symAddr(t, bin, "last_label")
	if name, off, err := m.Symbol(last); err != nil || name != "last_label" || off != 0 {
		t.Fatalf("last_label itself: %q+%#x, %v", name, off, err)
	}
	for _, s := range []string{"data_word", "bss_buf"} {
		a := symAddr(t, bin, s)
		if name, off, err := m.Symbol(a + 8); err == nil {
			t.Errorf("%s+8 (%#x) named %s+%#x, want no name: it lies in no symbol's section", s, a+8, name, off)
		}
	}
}

// TestReturnSymbolNamesTrampoline: a return address at a function's first
// byte whose ret-1 lies in padding (a planted one: __restore_rt,
// __start_context) names that function; one inside a function names the
// function holding the call.
func TestReturnSymbolNamesTrampoline(t *testing.T) {
	bin := buildEdges(t)
	c := NewCache(nil)
	defer c.Close()
	m, err := c.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	tr, fn := symAddr(t, bin, "tramp"), symAddr(t, bin, "sized_fn")
	if tr-fn <= 2 {
		t.Fatalf("no padding between sized_fn (%#x) and tramp (%#x)", fn, tr)
	}
	if name, off, err := m.ReturnSymbol(tr); err != nil || name != "tramp" || off != 0 {
		t.Errorf("ReturnSymbol(tramp) = %q+%#x, %v; want tramp+0", name, off, err)
	}
	if name, off, err := m.ReturnSymbol(fn + 2); err != nil || name != "sized_fn" || off != 2 {
		t.Errorf("ReturnSymbol(sized_fn+2) = %q+%#x, %v; want sized_fn+0x2", name, off, err)
	}
	if name, _, err := m.ReturnSymbol(fn + 5); err == nil {
		t.Errorf("ReturnSymbol in padding named %q", name)
	}
}
