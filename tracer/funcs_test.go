package tracer

import (
	"debug/elf"
	"os"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

func systemLib(t *testing.T, names ...string) string {
	for _, n := range names {
		if _, err := os.Stat(n); err == nil {
			return n
		}
	}
	t.Skipf("none of %v on this system", names)
	return ""
}

// TestPlacementOnSystemLibs checks every probe point chosen in the real
// libc and libstdc++: it must be an instruction the kernel emulates, and
// every instruction before it must leave the arguments and the stack alone.
func TestPlacementOnSystemLibs(t *testing.T) {
	for _, lib := range []string{
		systemLib(t, "/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
		systemLib(t, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"),
	} {
		pps, err := resolveLib(lib)
		if err != nil {
			t.Fatal(err)
		}
		f, _ := os.Open(lib)
		defer f.Close()
		ef, _ := elf.NewFile(f)
		if ef.Machine != elf.EM_X86_64 {
			t.Skip("x86 placement")
		}
		placed := 0
		for _, pp := range pps {
			code := make([]byte, 16)
			f.ReadAt(code, int64(pp.fileOff))
			inst, err := x86asm.Decode(code, 64)
			if err != nil {
				t.Fatalf("%s: decode at probe: %v", pp.symbol, err)
			}
			t.Logf("%-40s placed=%v insn=%v", pp.symbol, pp.placed, inst)
			if pp.placed {
				placed++
				if !emulated(inst) {
					t.Errorf("%s: probe on %v, which the kernel single-steps", pp.symbol, inst)
				}
			}
		}
		if placed*2 < len(pps) {
			t.Errorf("%s: only %d of %d probes on emulated instructions", lib, placed, len(pps))
		}
	}
}

func TestPlaceX86(t *testing.T) {
	cases := []struct {
		name string
		code []byte
		spec probeSpec
		off  uint64
		ok   bool
	}{
		{"push first", []byte{0x41, 0x54, 0x55}, probeSpec{args: 1}, 0, true},
		{"endbr then push", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0x55}, probeSpec{args: 1}, 4, true},
		// free: test rdi,rdi; je +0xbf; push rbp
		{"free null test", []byte{0x48, 0x85, 0xff, 0x0f, 0x84, 0xbf, 0, 0, 0, 0x55}, probeSpec{args: 1, skipNullTest: true}, 9, true},
		// the same without permission to skip the NULL test
		{"null test kept", []byte{0x48, 0x85, 0xff, 0x0f, 0x84, 0xbf, 0, 0, 0, 0x55}, probeSpec{args: 1}, 0, false},
		// mov rbx,rdi is harmless; mov rdi,rbx clobbers the argument
		{"harmless mov", []byte{0x48, 0x89, 0xfb, 0x55}, probeSpec{args: 1}, 3, true},
		{"clobbered arg", []byte{0x48, 0x89, 0xdf, 0x55}, probeSpec{args: 1}, 0, false},
		{"sub rsp", []byte{0x48, 0x83, 0xec, 0x08, 0x55}, probeSpec{args: 1}, 0, false},
		{"jmp tail call", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0xe9, 1, 2, 3, 4}, probeSpec{args: 1}, 4, true},
		{"garbage", []byte{0x0f, 0x0b}, probeSpec{args: 1}, 0, false},
		{"empty", nil, probeSpec{args: 1}, 0, false},
	}
	for _, c := range cases {
		off, ok := placeX86(c.code, c.spec)
		if off != c.off || ok != c.ok {
			t.Errorf("%s: got %d,%v want %d,%v", c.name, off, ok, c.off, c.ok)
		}
	}
}

func FuzzPlaceX86(f *testing.F) {
	f.Add([]byte{0x48, 0x85, 0xff, 0x0f, 0x84, 0xbf, 0, 0, 0, 0x55})
	f.Fuzz(func(t *testing.T, b []byte) {
		off, ok := placeX86(b, probeSpec{args: 2, skipNullTest: true})
		if ok && int(off) >= len(b) {
			t.Fatalf("offset %d past %d bytes", off, len(b))
		}
	})
}
