//go:build amd64 || arm64

package tracer

import (
	"debug/elf"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/arch/x86/x86asm"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/logfmt"
)

// allocatorLib returns the path of an installed allocator library (make
// deps installs them), failing when it is missing.
func allocatorLib(t *testing.T, name string) string {
	t.Helper()
	for _, d := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib"} {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("%s is not installed: run make deps", name)
	return ""
}

// TestAllocatorProbePoints: in jemalloc, tcmalloc and mimalloc every
// operator new gets return sites, each one a ret instruction of the file;
// the library is marked as an allocator's (its mmaps are its own); the
// names tcmalloc and mimalloc give one function are marked for naming by
// the PLT stub, and their own API functions are probed with their ops.
// libc and libstdc++ get none of that.
func TestAllocatorProbePoints(t *testing.T) {
	f, err := elf.Open(libcPath(t))
	if err != nil {
		t.Fatal(err)
	}
	machine := f.Machine
	f.Close()
	if machine != elf.EM_X86_64 {
		bpftest.Unavailable(t, "return sites are found on x86-64 only")
	}
	for _, c := range []struct {
		lib      string
		alias    []string    // probed symbols that must be marked as aliases
		api      []logfmt.Op // API ops probed in functions of their own
		notAlias []string
	}{
		{"libjemalloc.so.2", nil, []logfmt.Op{logfmt.OpMallocx, logfmt.OpRallocx, logfmt.OpXallocx, logfmt.OpSdallocx, logfmt.OpDallocx}, []string{"malloc", "free", "_Znwm"}},
		{"libtcmalloc_minimal.so.4", []string{"malloc", "free", "calloc", "realloc", "pvalloc", "_Znwm", "_ZdlPvm"}, []logfmt.Op{logfmt.OpTcMalloc}, nil},
		{"libmimalloc.so.2", []string{"malloc", "free", "calloc", "realloc"}, []logfmt.Op{logfmt.OpMiStrdup, logfmt.OpMiZalloc, logfmt.OpMiMallocAligned, logfmt.OpMiCallocAligned, logfmt.OpMiReallocAligned}, []string{"_ZnwmRKSt9nothrow_t"}},
	} {
		t.Run(c.lib, func(t *testing.T) {
			path := allocatorLib(t, c.lib)
			pps, err := resolveLib(path)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			rets, news := 0, 0
			bySym := map[string]probePoint{}
			ops := map[logfmt.Op]bool{}
			for _, pp := range pps {
				if !pp.allocLib {
					t.Errorf("%s: not marked as an allocator library's", pp.symbol)
				}
				bySym[pp.symbol] = pp
				ops[pp.def.op] = true
				switch pp.def.kind {
				case probeNewRet:
					rets++
					inst, err := x86asm.Decode(raw[pp.fileOff:], 64)
					if err != nil || inst.Op != x86asm.RET {
						t.Errorf("return site at file offset %#x is %v (%v), not a ret", pp.fileOff, inst, err)
					}
				case probeNew:
					news++
				}
			}
			if news == 0 || rets < news/2 {
				t.Errorf("%d news, %d return sites", news, rets)
			}
			for _, s := range c.alias {
				if pp, ok := bySym[s]; !ok || !pp.alias {
					t.Errorf("%s: probed %v, alias %v: want an alias", s, ok, pp.alias)
				}
			}
			for _, s := range c.notAlias {
				if pp, ok := bySym[s]; !ok || pp.alias {
					t.Errorf("%s: probed %v, alias %v: want a function of its own", s, ok, pp.alias)
				}
			}
			for _, op := range c.api {
				if !ops[op] {
					t.Errorf("API op %v is not probed", op)
				}
			}
		})
	}
	for _, lib := range []string{libcPath(t), allocatorLib(t, "libstdc++.so.6")} {
		pps, err := resolveLib(lib)
		if err != nil {
			t.Fatal(err)
		}
		for _, pp := range pps {
			if pp.allocLib || pp.def.kind == probeNewRet {
				t.Errorf("%s: %s marked as an allocator's own (allocLib %v, kind %d)", lib, pp.symbol, pp.allocLib, pp.def.kind)
			}
			if pp.alias && pp.def.op != logfmt.OpAlignedAlloc && pp.def.op != logfmt.OpMemalign {
				t.Errorf("%s: %s marked as an alias", lib, pp.symbol)
			}
		}
	}
}

// TestSymbolOp: the names the agent meets at PLT stubs give the op each
// logs; names memtrace does not probe give none.
func TestSymbolOp(t *testing.T) {
	for name, want := range map[string]logfmt.Op{
		"malloc": logfmt.OpMalloc, "memalign": logfmt.OpMemalign, "_ZdlPv": logfmt.OpDelete, "_ZdaPvm": logfmt.OpDeleteArr,
		"_Znaj": logfmt.OpNewArr, "_ZdlPvj": logfmt.OpDelete, "tc_free": logfmt.OpTcFree, "tc_delete_sized": logfmt.OpTcDelete,
		"tc_newarray_nothrow": logfmt.OpTcNewArr, "mi_free_size": logfmt.OpMiFree, "mi_malloc": logfmt.OpMiMalloc,
		"mallocx": logfmt.OpMallocx, "sdallocx": logfmt.OpSdallocx,
	} {
		if got, ok := event.SymbolOp(name); !ok || got != want {
			t.Errorf("SymbolOp(%q) = %v %v, want %v", name, got, ok, want)
		}
	}
	for _, name := range []string{"", "printf", "mi_new", "tc_version", "je_malloc"} {
		if got, ok := event.SymbolOp(name); ok {
			t.Errorf("SymbolOp(%q) = %v, want none", name, got)
		}
	}
}

// TestReturnSitesWalk: on hand-made code the walk finds the rets reached
// through branches and tail jumps, follows no call, and stops at an
// indirect jump.
func TestReturnSitesWalk(t *testing.T) {
	code := []byte{
		0x48, 0x85, 0xff, // 0: test rdi, rdi
		0x74, 0x06, //       3: je 11
		0xe8, 0x10, 0, 0, 0, // 5: call 26 (not followed: its ret returns here)
		0xc3,       // 10: ret
		0xeb, 0x01, // 11: jmp 14
		0xc3,       // 13: ret (unreached)
		0xff, 0xe0, // 14: jmp rax (the walk ends)
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0xc3, // 26: the callee's ret
	}
	const base = 0x1000
	c := codeAt(base, code)
	got := c.returnSites([]uint64{base})
	if len(got) != 1 || got[0] != base+10 {
		t.Fatalf("return sites %#x, want [%#x]", got, base+10)
	}
}

// codeAt is an elfCode whose only bytes are code, at base.
func codeAt(base uint64, code []byte) *elfCode {
	return &elfCode{readAt: func(v uint64, n int) []byte {
		if v < base || v >= base+uint64(len(code)) {
			return nil
		}
		b := code[v-base:]
		if len(b) > n {
			b = b[:n]
		}
		return b
	}, plt: map[uint64]string{}, funcs: map[string]uint64{}}
}

// FuzzReturnSites: any bytes as code: the walk ends within its bounds and
// returns only addresses inside the code, never panics.
func FuzzReturnSites(f *testing.F) {
	f.Add([]byte{0xc3})
	f.Add([]byte{0x74, 0x00, 0xc3, 0xeb, 0xfe})
	f.Add([]byte{0xf3, 0x0f, 0x1e, 0xfa, 0xe9, 0xf7, 0xff, 0xff, 0xff})
	f.Add([]byte{0xff, 0x25, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, code []byte) {
		const base = 0x4000
		c := codeAt(base, code)
		rets := c.returnSites([]uint64{base})
		if len(rets) > maxRetSites+1 {
			t.Fatalf("%d return sites", len(rets))
		}
		for _, r := range rets {
			if r < base || r >= base+uint64(len(code)) {
				t.Fatalf("return site %#x outside the code", r)
			}
		}
	})
}
