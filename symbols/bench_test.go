package symbols

import (
	"debug/elf"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// benchSet maps real libraries and a -g C++ test binary (T21) at made-up bases the
// way the dynamic loader would (one mapping per PT_LOAD), and picks frame
// addresses inside their functions.
type benchSet struct {
	maps  []Mapping
	addrs []uint64 // all modules
	prog  []uint64 // the -g binary only (has DWARF)
	progV []uint64 // same, as ELF vaddrs (for addr2line)
}

var benchLibs = []string{
	"/lib/x86_64-linux-gnu/libc.so.6",
	"/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
}

func newBenchSet(b *testing.B) *benchSet {
	b.Helper()
	dbg := buildT21(b)
	s := &benchSet{}
	base := uint64(0x7f0000000000)
	for i, p := range append([]string{dbg}, benchLibs...) {
		ef, err := elf.Open(p)
		if err != nil {
			if i == 0 {
				b.Fatal(err)
			}
			b.Logf("skipping %s: %v", p, err)
			continue
		}
		st, _ := os.Stat(p)
		fh, _ := os.Open(p)
		id, _, _, _ := fileIDOf(fh)
		fh.Close()
		_ = st
		for _, pr := range ef.Progs {
			if pr.Type != elf.PT_LOAD {
				continue
			}
			perms := "r--p"
			if pr.Flags&elf.PF_X != 0 {
				perms = "r-xp"
			}
			start := (base + pr.Vaddr) &^ 0xfff
			s.maps = append(s.maps, Mapping{Start: start, End: (base + pr.Vaddr + pr.Memsz + 0xfff) &^ 0xfff,
				Perms: perms, Offset: pr.Off &^ 0xfff, File: id, Path: p})
		}
		syms, _ := ef.DynamicSymbols()
		if i == 0 {
			syms, _ = ef.Symbols()
		}
		var fn []elf.Symbol
		for _, sy := range syms {
			if elf.ST_TYPE(sy.Info) == elf.STT_FUNC && sy.Value != 0 && sy.Size > 4 {
				fn = append(fn, sy)
			}
		}
		step := max(1, len(fn)/1000)
		for j := 0; j < len(fn); j += step {
			v := fn[j].Value + fn[j].Size/2
			s.addrs = append(s.addrs, base+v)
			if i == 0 {
				s.prog = append(s.prog, base+v)
				s.progV = append(s.progV, v)
			}
		}
		ef.Close()
		base += 0x100000000
	}
	return s
}

func (s *benchSet) space(b *testing.B, c *Cache) *AddressSpace {
	as, _ := NewAddressSpace(c, 0)
	if err := as.AddSnapshot(s.maps, 1); err != nil {
		b.Fatal(err)
	}
	return as
}

func reportFPS(b *testing.B, frames int, d time.Duration) {
	b.ReportMetric(float64(frames)/d.Seconds(), "frames/s")
}

// Cold: a new cache per iteration, so every module's tables are parsed.
func benchCold(b *testing.B, addrs func(*benchSet) []uint64, flags Flags) {
	s := newBenchSet(b)
	a := addrs(s)
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		c := NewCache(nil)
		as := s.space(b, c)
		for _, x := range a {
			as.Resolve(x, flags)
		}
		c.Close()
	}
	reportFPS(b, b.N*len(a), time.Since(start))
	b.ReportMetric(float64(len(a)), "frames/op")
}

func benchWarm(b *testing.B, addrs func(*benchSet) []uint64, flags Flags) {
	s := newBenchSet(b)
	a := addrs(s)
	c := NewCache(nil)
	defer c.Close()
	as := s.space(b, c)
	for _, x := range a {
		as.Resolve(x, flags)
	}
	b.ResetTimer()
	start := time.Now()
	n := 0
	for b.Loop() {
		as.Resolve(a[n%len(a)], flags)
		n++
	}
	reportFPS(b, n, time.Since(start))
}

func allAddrs(s *benchSet) []uint64  { return s.addrs }
func progAddrs(s *benchSet) []uint64 { return s.prog }

// Symbol only (what the agent writes into the log): libc, libstdc++, test binary.
func BenchmarkResolveCold(b *testing.B) { benchCold(b, allAddrs, ReturnAddress) }
func BenchmarkResolveWarm(b *testing.B) { benchWarm(b, allAddrs, ReturnAddress) }

// With file:line and inline frames, over the -g C++ test binary.
func BenchmarkResolveSourceCold(b *testing.B) { benchCold(b, progAddrs, ReturnAddress|WithSource) }
func BenchmarkResolveSourceWarm(b *testing.B) { benchWarm(b, progAddrs, ReturnAddress|WithSource) }

// Baseline: binutils addr2line -f -i over the same addresses, one process
// per batch (what memtrack's L toggle runs).
func BenchmarkAddr2lineBaseline(b *testing.B) {
	a2l, err := exec.LookPath("addr2line")
	if err != nil {
		b.Skip("addr2line not installed")
	}
	s := newBenchSet(b)
	args := []string{"-f", "-i", "-e", buildT21(b)}
	for _, v := range s.progV {
		args = append(args, strconv.FormatUint(v-1, 16))
	}
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if out, err := exec.Command(a2l, args...).Output(); err != nil || len(out) == 0 {
			b.Fatal(err)
		}
	}
	reportFPS(b, b.N*len(s.progV), time.Since(start))
	b.ReportMetric(float64(len(s.progV)), "frames/op")
}
