package unwind

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The table is checked against an independent interpreter of the same
// CFI: binutils' `readelf --debug-dump=frames-interp`, which prints, per
// FDE, the rule of every register at each location where one changes.

type refRow struct {
	loc          uint64
	cfa, fp, ra  string
	hasFP, hasRA bool
}

type refFDE struct {
	start, end uint64
	cie        uint64
	rows       []refRow
}

type refCIE struct {
	aug  string
	ra   uint64
	rows []refRow
}

var (
	reFDE   = regexp.MustCompile(`^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ FDE cie=([0-9a-f]+) pc=([0-9a-f]+)\.\.([0-9a-f]+)`)
	reCIE   = regexp.MustCompile(`^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ CIE "([^"]*)" cf=\S+ df=\S+ ra=(\d+)`)
	reCell  = regexp.MustCompile(`\S+(?: \([^)]*\))?`)
	reRowPC = regexp.MustCompile(`^[0-9a-f]{16} `)
)

// readelfFrames runs readelf -wF on path and returns the FDEs and CIEs of
// the section named sec (".eh_frame" or ".debug_frame").
func readelfFrames(t *testing.T, readelf, path, sec string, a Arch) ([]refFDE, map[uint64]*refCIE) {
	t.Helper()
	// -wN: not the separate debug file's sections (NOBITS .eh_frame there).
	out, err := exec.Command(readelf, "-wN", "--debug-dump=frames-interp", path).Output()
	if err != nil {
		t.Fatalf("readelf -wF %s: %v", path, err)
	}
	var fdes []refFDE
	cies := map[uint64]*refCIE{}
	var cols []string
	var curRows *[]refRow
	in := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	hex := func(s string) uint64 {
		v, err := strconv.ParseUint(s, 16, 64)
		if err != nil {
			t.Fatalf("readelf output: bad number %q", s)
		}
		return v
	}
	fpName := "rbp"
	if a == ArchARM64 {
		fpName = "x29"
	}
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "Contents of the ") {
			in = strings.HasPrefix(line, "Contents of the "+sec+" section")
			curRows = nil
			continue
		}
		if !in {
			continue
		}
		if m := reCIE.FindStringSubmatch(line); m != nil {
			ra, _ := strconv.ParseUint(m[3], 10, 64)
			c := &refCIE{aug: m[2], ra: ra}
			cies[hex(m[1])] = c
			curRows = &c.rows
			continue
		}
		if m := reFDE.FindStringSubmatch(line); m != nil {
			fdes = append(fdes, refFDE{cie: hex(m[2]), start: hex(m[3]), end: hex(m[4])})
			curRows = &fdes[len(fdes)-1].rows
			continue
		}
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "LOC" && f[1] == "CFA" {
			cols = f
			continue
		}
		if curRows == nil || !reRowPC.MatchString(line) {
			continue
		}
		cells := reCell.FindAllString(line, -1)
		if len(cells) != len(cols) {
			t.Fatalf("readelf row %q has %d cells for columns %v", line, len(cells), cols)
		}
		r := refRow{loc: hex(cells[0]), cfa: cells[1]}
		for i, c := range cols[2:] {
			switch c {
			case fpName:
				r.fp, r.hasFP = cells[i+2], true
			case "ra":
				r.ra, r.hasRA = cells[i+2], true
			}
		}
		*curRows = append(*curRows, r)
	}
	return fdes, cies
}

// expect turns a readelf row into the Rule the table must hold. alt is a
// second acceptable rule where readelf's notation is ambiguous ("u" is
// both "never mentioned" and DW_CFA_undefined; "exp" is any expression).
func expect(a Arch, r refRow, cie *refCIE) (want Rule, alt []Rule) {
	signal := strings.Contains(cie.aug, "S")
	unsupported := Rule{CFA: CFAUnsupported, Signal: signal}
	regs := regsOf(a)
	if cie.ra != regs.ra {
		return unsupported, nil
	}
	spName, fpName := "rsp", "rbp"
	if a == ArchARM64 {
		spName, fpName = "sp", "x29"
	}
	offset := func(s, prefix string) (int64, bool) {
		if !strings.HasPrefix(s, prefix) {
			return 0, false
		}
		v, err := strconv.ParseInt(s[len(prefix):], 10, 64)
		return v, err == nil
	}
	// The return address.
	ra := r.ra
	if !r.hasRA {
		ra = "u"
	}
	var inLR bool
	switch {
	case ra == "u" && a == ArchAMD64:
		return Rule{CFA: CFAEnd, Signal: signal}, nil
	case ra == "u" || ra == "s":
		inLR = true
		if ra == "u" {
			alt = append(alt, Rule{CFA: CFAEnd, Signal: signal})
		}
	}
	if ra == "exp" || ra == "vexp" {
		return unsupported, nil
	}
	want.Signal = signal
	if inLR {
		want.RA = RAInLR
	} else if off, ok := offset(ra, "c"); ok {
		want.RA, want.RAOffset = RAAtCFA, off
	} else {
		return unsupported, alt
	}
	// The CFA.
	switch {
	case r.cfa == "exp":
		return unsupported, append(alt, Rule{CFA: CFAPLT, CFAOffset: 8, PLTThreshold: 11, RA: RAAtCFA, RAOffset: -8, Signal: signal})
	case strings.HasPrefix(r.cfa, spName+"+") || strings.HasPrefix(r.cfa, spName+"-"):
		want.CFA = CFASP
		want.CFAOffset, _ = strconv.ParseInt(r.cfa[len(spName):], 10, 64)
	case strings.HasPrefix(r.cfa, fpName+"+") || strings.HasPrefix(r.cfa, fpName+"-"):
		want.CFA = CFAFP
		want.CFAOffset, _ = strconv.ParseInt(r.cfa[len(fpName):], 10, 64)
	default:
		return unsupported, alt
	}
	// The frame pointer.
	switch fp := r.fp; {
	case !r.hasFP || fp == "u" || fp == "s":
		want.FP = FPUnchanged
	default:
		if off, ok := offset(fp, "c"); ok {
			want.FP, want.FPOffset = FPAtCFA, off
		} else {
			want.FP = FPUnknown
		}
	}
	if a == ArchAMD64 && (want.RA != RAAtCFA || want.RAOffset != -8) {
		return unsupported, alt
	}
	return want, alt
}

func sameOutcome(got, want Rule) bool {
	if got.CFA == CFAUnsupported || got.CFA == CFAEnd || got.CFA == CFAGap {
		return got.CFA == want.CFA && got.Signal == want.Signal
	}
	return got == want
}

// checkAgainstReadelf compares tab with readelf's view of path's sec: the
// rule at every location readelf lists, a gap after every FDE with no
// neighbour within MinGap, and no row boundary anywhere else.
func checkAgainstReadelf(t *testing.T, tab *Table, path, sec string) int {
	t.Helper()
	readelf := requireTool(t, "readelf", false)
	fdes, cies := readelfFrames(t, readelf, path, sec, tab.Arch)
	if len(fdes) == 0 {
		t.Fatalf("readelf found no FDE in %s of %s", sec, path)
	}
	sort.Slice(fdes, func(i, j int) bool { return fdes[i].start < fdes[j].start })
	boundaries := map[uint64]bool{}
	checked, failures := 0, 0
	fail := func(format string, args ...any) {
		failures++
		if failures <= 20 {
			t.Errorf(format, args...)
		}
	}
	for i, f := range fdes {
		if f.end <= f.start {
			continue
		}
		cie := cies[f.cie]
		if cie == nil {
			t.Fatalf("FDE %#x..%#x: readelf names CIE %#x it did not print", f.start, f.end, f.cie)
		}
		rows := f.rows
		if len(rows) == 0 {
			// No instructions: the CIE's initial rule holds throughout.
			if len(cie.rows) == 0 {
				t.Fatalf("CIE %#x has no row", f.cie)
			}
			rows = []refRow{cie.rows[len(cie.rows)-1]}
			rows[0].loc = f.start
		}
		limit := f.end
		if i+1 < len(fdes) && fdes[i+1].start < limit {
			limit = fdes[i+1].start
		}
		for _, r := range rows {
			if r.loc >= limit {
				continue
			}
			boundaries[r.loc] = true
			want, alt := expect(tab.Arch, r, cie)
			got := tab.Lookup(r.loc)
			ok := sameOutcome(got, want)
			for _, a := range alt {
				ok = ok || sameOutcome(got, a)
			}
			if !ok {
				fail("%s %#x (FDE %#x..%#x): got %+v, readelf says CFA %s fp %q ra %q (want %+v or %+v)",
					sec, r.loc, f.start, f.end, got, r.cfa, r.fp, r.ra, want, alt)
			}
			checked++
		}
		boundaries[limit] = true
		if i+1 == len(fdes) || fdes[i+1].start >= limit+MinGap {
			if got := tab.Lookup(limit); got.CFA != CFAGap {
				fail("%#x, the end of FDE %#x..%#x: got %+v, want a gap", limit, f.start, f.end, got)
			}
		}
	}
	// Synthesized PLT rules (sections without FDEs) start and end rows too.
	ef, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	nsynth := 0
	for _, s := range ef.Sections {
		if s.Name == ".plt" || s.Name == ".iplt" || s.Name == ".plt.got" || s.Name == ".plt.sec" {
			if r := tab.Lookup(s.Addr); s.Size > 0 && !boundaries[s.Addr] && r.CFA == CFASP {
				boundaries[s.Addr], boundaries[s.Addr+s.Size] = true, true
				nsynth++
			}
		}
	}
	if nsynth != tab.Stats.SyntheticPLT {
		fail("%d PLT sections without FDEs, but %d synthesized rules", nsynth, tab.Stats.SyntheticPLT)
	}
	for _, r := range tab.Rows {
		if vaddr := tab.Base + uint64(r.PC); !boundaries[vaddr] {
			fail("row at %#x (%v) is at no location readelf lists", vaddr, r.CFAType())
		}
	}
	if failures > 20 {
		t.Errorf("... %d failures in all", failures)
	}
	return checked
}

// TestTableMatchesReadelf checks the tables of Debian's libc, libstdc++
// and ld.so (x86-64 and arm64) and of the -O2 test program.
func TestTableMatchesReadelf(t *testing.T) {
	files := []struct {
		path  string
		arch  Arch
		cross bool
	}{
		{"/lib/x86_64-linux-gnu/libc.so.6", ArchAMD64, false},
		{"/usr/lib/x86_64-linux-gnu/libstdc++.so.6", ArchAMD64, false},
		{"/lib64/ld-linux-x86-64.so.2", ArchAMD64, false},
		{"/usr/aarch64-linux-gnu/lib/libc.so.6", ArchARM64, true},
		{"/usr/aarch64-linux-gnu/lib/libstdc++.so.6", ArchARM64, true},
		{"/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1", ArchARM64, true},
	}
	for _, f := range files {
		t.Run(f.path, func(t *testing.T) {
			tab := mustTable(t, f.path, f.cross)
			if tab.Arch != f.arch {
				t.Fatalf("arch %v, want %v", tab.Arch, f.arch)
			}
			n := checkAgainstReadelf(t, tab, f.path, ".eh_frame")
			t.Logf("%d locations agree; %d rows", n, len(tab.Rows))
		})
	}
	for _, wt := range walkTargets() {
		t.Run("walk-"+wt.arch.String(), func(t *testing.T) {
			bin := buildWalk(t, wt)
			tab, err := BuildTableFile(bin, nil)
			if err != nil {
				t.Fatal(err)
			}
			n := checkAgainstReadelf(t, tab, bin, ".eh_frame")
			t.Logf("%d locations agree; %d rows", n, len(tab.Rows))
		})
	}
}

// mustTable builds the table of a system file, skipping (or failing under
// MEMTRACE_REQUIRE_CROSS=1) when a cross library is not installed.
func mustTable(t *testing.T, path string, cross bool) *Table {
	t.Helper()
	tab, err := BuildTableFile(path, nil)
	if err != nil {
		if cross {
			requireTool(t, "aarch64-linux-gnu-gcc", true)
		}
		t.Fatal(err)
	}
	return tab
}
