package symbols

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func newAS(t testing.TB, c *Cache, ms []Mapping) *AddressSpace {
	t.Helper()
	as, err := NewAddressSpace(c, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := as.AddSnapshot(ms, 1); err != nil {
		t.Logf("snapshot: %v", err) // e.g. [vdso] has no file; not fatal
	}
	return as
}

// The symbol and offset we compute for every frame of a real backtrace
// must match what glibc's own backtrace_symbols printed for it.
func TestResolveMatchesBacktraceSymbols(t *testing.T) {
	f := fixtures(t)
	for _, mode := range []string{"direct", "static", "inline"} {
		t.Run(mode, func(t *testing.T) {
			r := runProg(t, f.prog, mode)
			if len(r.frames) < 4 {
				t.Fatalf("expected a backtrace of at least 4 frames, got %d: %v", len(r.frames), r.lines)
			}
			c := NewCache(nil)
			defer c.Close()
			as := newAS(t, c, r.maps["MAPS"])
			for i, bt := range r.frames {
				fr, err := as.Resolve(bt.addr, ReturnAddress)
				if filepath.Base(fr.Module) != filepath.Base(bt.module) {
					t.Errorf("frame %d %#x: module %q, glibc says %q (err %v)", i, bt.addr, fr.Module, bt.module, err)
					continue
				}
				if bt.symbol == "" {
					// glibc found no exported symbol and printed the
					// offset from the load base: that is our ModuleOffset.
					if fr.ModuleOffset != bt.off {
						t.Errorf("frame %d %#x: module offset %#x, glibc says +%#x", i, bt.addr, fr.ModuleOffset, bt.off)
					}
					continue
				}
				if fr.Symbol != bt.symbol || fr.Offset != bt.off {
					t.Errorf("frame %d %#x: %s+%#x, glibc says %s+%#x (err %v)", i, bt.addr, fr.Symbol, fr.Offset, bt.symbol, bt.off, err)
				}
			}
		})
	}
}

// A source line is the line-table row covering the call, for a plain call,
// for a static function (only in .symtab), and through an inlined frame.
func TestSourceLineOfKnownCall(t *testing.T) {
	f := fixtures(t)
	cases := []struct {
		mode, fn, mark string
		inline         []string // expected Source chain: function@mark, innermost first
	}{
		{"direct", "alloc_site", "record", nil},
		{"static", "static_site", "static-record", nil},
		{"inline", "outer", "inl", []string{"inl_record@inl", "outer@outer-call"}},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			r := runProg(t, f.prog, tc.mode)
			c := NewCache(nil)
			defer c.Close()
			as := newAS(t, c, r.maps["MAPS"])
			// saved[0] is in record() itself, saved[1] in its caller.
			fr, err := as.Resolve(r.frames[1].addr, ReturnAddress|WithSource)
			if err != nil {
				t.Fatalf("resolve %#x: %v", r.frames[1].addr, err)
			}
			want := markLine(t, f.progSrc, tc.mark)
			if fr.Symbol != tc.fn || fr.File != f.progSrc || fr.Line != want {
				t.Fatalf("got %s at %s:%d, want %s at %s:%d", fr.Symbol, fr.File, fr.Line, tc.fn, f.progSrc, want)
			}
			if tc.inline != nil {
				var got []string
				for _, s := range fr.Source {
					if s.File != f.progSrc {
						t.Errorf("inline frame %+v: file %q, want %q", s, s.File, f.progSrc)
					}
					got = append(got, s.Function+"@"+strconv.Itoa(s.Line))
				}
				var exp []string
				for _, w := range tc.inline {
					fn, mark, _ := strings.Cut(w, "@")
					exp = append(exp, fn+"@"+strconv.Itoa(markLine(t, f.progSrc, mark)))
				}
				if strings.Join(got, " ") != strings.Join(exp, " ") {
					t.Fatalf("inline chain %v, want %v", got, exp)
				}
				// addr2line -i agrees (same PC: the return address - 1).
				a2l := run(t, needTool(t, "addr2line"), "-f", "-i", "-e", f.prog, strconv.FormatUint(fr.ModuleOffset-1, 16))
				lines := strings.Split(strings.TrimSpace(a2l), "\n")
				var a2 []string
				for i := 0; i+1 < len(lines); i += 2 {
					_, ln, _ := strings.Cut(lines[i+1], ":")
					ln, _, _ = strings.Cut(ln, " ")
					a2 = append(a2, lines[i]+"@"+ln)
				}
				if strings.Join(a2, " ") != strings.Join(got, " ") {
					t.Fatalf("addr2line -i says %v, we say %v", a2, got)
				}
			}
			// A log reader has only MODULE(SYMBOL+0xOFF) or MODULE(+0xOFF).
			file, line, err := c.SourceLine(fr.Module, fr.Symbol, fr.Offset)
			if err != nil || file != f.progSrc || line != want {
				t.Fatalf("SourceLine(%s, %s, %#x) = %s:%d, %v; want line %d", fr.Module, fr.Symbol, fr.Offset, file, line, err, want)
			}
			file, line, err = c.SourceLine(fr.Module, "", fr.ModuleOffset)
			if err != nil || file != f.progSrc || line != want {
				t.Fatalf("SourceLine(%s, \"\", %#x) = %s:%d, %v; want line %d", fr.Module, fr.ModuleOffset, file, line, err, want)
			}
		})
	}
}

// Frames inside a library that was dlopen'ed, used and dlclose'd before
// anyone looked at them still resolve: the later snapshot no longer lists
// the library, and the file is even deleted before resolution.
func TestDlopenedLibraryAfterDlclose(t *testing.T) {
	f := fixtures(t)
	dir := t.TempDir()
	lib := filepath.Join(dir, "libplug.so")
	data, err := os.ReadFile(f.plug)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, lib, string(data))
	r := runProg(t, f.prog, "dlopen", lib)
	inMaps := func(ms []Mapping) bool {
		for _, m := range ms {
			if m.Path == lib {
				return true
			}
		}
		return false
	}
	if !inMaps(r.maps["MAPS1"]) || inMaps(r.maps["MAPS2"]) {
		t.Fatalf("fixture precondition: library mapped while open and gone after dlclose (open=%v after=%v)",
			inMaps(r.maps["MAPS1"]), inMaps(r.maps["MAPS2"]))
	}
	c := NewCache(nil)
	defer c.Close()
	as, _ := NewAddressSpace(c, 0)
	as.AddSnapshot(r.maps["MAPS1"], 1)
	as.AddSnapshot(r.maps["MAPS2"], 2)
	if err := os.Remove(lib); err != nil {
		t.Fatal(err)
	}
	want := []struct{ fn, mark string }{{"plug_inner", "plug-bt"}, {"plug_entry", "plug-call"}}
	for i, w := range want {
		fr, err := as.Resolve(r.frames[i].addr, ReturnAddress|WithSource)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		line := markLine(t, f.plugSrc, w.mark)
		if fr.Module != lib || fr.Symbol != w.fn || fr.File != f.plugSrc || fr.Line != line {
			t.Fatalf("frame %d: %s(%s) %s:%d, want %s(%s) %s:%d", i, fr.Module, fr.Symbol, fr.File, fr.Line, lib, w.fn, f.plugSrc, line)
		}
		if r.frames[i].symbol == w.fn && r.frames[i].off != fr.Offset {
			t.Fatalf("frame %d: offset %#x, glibc says %#x", i, fr.Offset, r.frames[i].off)
		}
	}
}

// A live process is read through /proc/PID; after it exits its frames still
// resolve, through the descriptors taken while it ran.
func TestProcessThatExited(t *testing.T) {
	f := fixtures(t)
	cmd := exec.Command(f.prog, "wait")
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 1<<16)
	tmp := make([]byte, 4096)
	var addr uint64
	for addr == 0 {
		n, err := out.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if i := strings.Index(string(buf), "ADDR 0x"); i >= 0 {
			if j := strings.IndexByte(string(buf[i:]), '\n'); j > 0 {
				addr, _ = strconv.ParseUint(string(buf[i+7:i+j]), 16, 64)
			}
		}
		if err != nil {
			t.Fatalf("reading fixture: %v", err)
		}
	}
	c := NewCache(nil)
	defer c.Close()
	as, err := NewAddressSpace(c, cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer as.Close()
	if err := as.ReadProcMaps(1); err != nil {
		t.Logf("maps: %v", err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(cmd.Process.Pid)); err == nil {
		t.Fatal("process still exists")
	}
	fr, err := as.Resolve(addr, WithSource)
	if err != nil || fr.Symbol != "alloc_site" || fr.Offset != 0 || fr.File != f.progSrc {
		t.Fatalf("after exit: %+v, %v", fr, err)
	}
	if _, err := NewAddressSpace(c, cmd.Process.Pid); err == nil {
		t.Fatal("NewAddressSpace of an exited pid should fail")
	}
}

func TestResolveUnmapped(t *testing.T) {
	c := NewCache(nil)
	as, _ := NewAddressSpace(c, 0)
	if _, err := as.Resolve(0x1234, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unmapped address: %v, want ErrNotFound", err)
	}
	as.AddMapping(Mapping{Start: 0x1000, End: 0x2000, Perms: "rw-p", Path: "[heap]"}, 1)
	fr, err := as.Resolve(0x1800, 0)
	if !errors.Is(err, ErrNotFound) || fr.Module != "[heap]" || fr.ModuleOffset != 0x800 {
		t.Fatalf("heap address: %+v %v", fr, err)
	}
}
