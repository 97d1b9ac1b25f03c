package tests

// The stack oracle on the ARM targets (issue 23): the cross-built
// memtrace, run under qemu-user, traces the cross-built oracle program
// (progs/unwind_oracle) through --preload with its own embedded library,
// and every allocation's stack is compared frame for frame with the one
// the program recorded with glibc's backtrace() right before, by the
// x86-64 oracle's code (stacks_dwarf_test.go).
//
// memtrace starts the program with fork and execve, which qemu-user
// passes to the host kernel: an ARM program runs there only through a
// binfmt_misc handler, so the test registers qemu for the target's ELF
// files while it runs (registerQemu). Both guests find their libc under
// QEMU_LD_PREFIX, and so see the same files at the same paths: memtrace
// builds its unwind tables from the files the library names.

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/logfmt"
)

const binfmtDir = "/proc/sys/fs/binfmt_misc"

// elfMagic is the binfmt_misc magic and mask of a target's ELF programs
// and libraries (qemu's own scripts/qemu-binfmt-conf.sh): class, byte
// order, version, e_type EXEC or DYN (mask fe), e_machine; the OS ABI
// byte is not compared. They match no x86 file, so a handler that
// outlives a test for a moment changes nothing for the other tests.
func elfMagic(arch string) (magic, mask []byte) {
	magic = []byte("\x7fELF\x01\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00")
	mask = []byte("\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff")
	switch arch {
	case "arm64":
		magic[4], magic[18] = 2, 0xb7 // ELFCLASS64, EM_AARCH64
	case "arm":
		magic[18] = 0x28 // EM_ARM
	}
	return magic, mask
}

func binfmtEscape(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		fmt.Fprintf(&s, "\\x%02x", c) // every byte: a ':' would end the field
	}
	return s.String()
}

// removeBinfmt unregisters a handler; one already gone is no error.
func removeBinfmt(name string) error {
	err := os.WriteFile(filepath.Join(binfmtDir, name), []byte("-1"), 0)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove binfmt_misc handler %s: %w", name, err)
	}
	return nil
}

// registerQemu makes the kernel run the target's ELF files with qemu
// until t ends. The handler is named after this test process, so that two
// test runs at once do not remove each other's; one left by a run that
// was killed (its process gone) is removed first. Flag F: the kernel
// opens qemu now, not in the namespace of each exec.
func registerQemu(t *testing.T, arch, qemu string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(binfmtDir, "register")); err != nil {
		if err := unix.Mount("binfmt_misc", binfmtDir, "binfmt_misc", 0, ""); err != nil {
			bpftest.Unavailable(t, "binfmt_misc is not mounted at %s and mounting it failed (%v): run the test as root", binfmtDir, err)
		}
	}
	interp, err := exec.LookPath(qemu)
	if err != nil {
		bpftest.Unavailable(t, "%s is missing (make deps installs qemu-user)", qemu)
	}
	prefix := "memtrace-test-" + arch + "-"
	entries, err := os.ReadDir(binfmtDir)
	if err != nil {
		t.Fatalf("list binfmt_misc handlers: %v", err)
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		if pid, err := strconv.Atoi(rest); err == nil && pid != os.Getpid() && unix.Kill(pid, 0) != unix.ESRCH {
			continue // another test run's, still running
		}
		if err := removeBinfmt(e.Name()); err != nil {
			t.Fatal(err)
		}
	}
	name := prefix + strconv.Itoa(os.Getpid())
	magic, mask := elfMagic(arch)
	line := fmt.Sprintf(":%s:M::%s:%s:%s:F", name, binfmtEscape(magic), binfmtEscape(mask), interp)
	if err := os.WriteFile(filepath.Join(binfmtDir, "register"), []byte(line), 0); err != nil {
		bpftest.Unavailable(t, "register %s with binfmt_misc: %v (the test runs as root)", qemu, err)
	}
	t.Cleanup(func() {
		if err := removeBinfmt(name); err != nil {
			t.Error(err)
		}
	})
}

// crossOracle builds the oracle program for a target (tests/progs'
// Makefile, CROSS=triplet) and returns it.
func crossOracle(t *testing.T, triplet string) string {
	t.Helper()
	root := repoRoot(t)
	dir := filepath.Join("build", triplet)
	cmd := command("make", "-s", "-C", "tests/progs", "CROSS="+triplet,
		filepath.Join(dir, "unwind_oracle"), filepath.Join(dir, "unwind_dl.so"))
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %v: %v\n%s", cmd.Args[1:], err, out)
	}
	return filepath.Join(root, "tests/progs", dir, "unwind_oracle")
}

// crossMemtrace is the target's memtrace of make cross, which make test
// builds before the tests.
func crossMemtrace(t *testing.T, arch string) string {
	t.Helper()
	p := filepath.Join(repoRoot(t), "bin", "linux-"+arch, "memtrace")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run make cross (make test does)", p)
	}
	return p
}

// runGuestMemtrace runs the target's memtrace under qemu with args, the
// program's record going to r.truth.
func (r *run) runGuestMemtrace(t *testing.T, qemu, sysroot, memtrace string, env []string, args ...string) {
	t.Helper()
	cmd := command(qemu, append([]string{memtrace}, args...)...)
	// The guest memtrace's environment is its program's: both find the
	// target's libc under the prefix, memtrace's program through the
	// handler's qemu. That qemu is a host program, so the host's ld.so
	// sees the guest library in LD_PRELOAD too, says it "cannot be
	// preloaded" on stderr and goes on; qemu hands the variable to the
	// guest, whose ld.so preloads it.
	cmd.Env = r.env(append([]string{"QEMU_LD_PREFIX=" + sysroot}, env...)...)
	cmd.Stderr = &r.stderr
	cmd.Stdout = &r.stderr
	if err := runCmd(t, cmd, runLimit); err != nil {
		t.Fatalf("%s memtrace %v: %v\n%s", qemu, args, err, r.stderr.String())
	}
}

// TestCrossDwarfOraclePreload: on arm64 and 32-bit ARM, under qemu-user,
// `memtrace --preload`'s stacks equal the program's backtrace() record in
// every frame, for every allocation of every scenario (plain, dlopen,
// fork, exec), and the event lines are the recorded ones. arm64 runs both
// of the library's walks, as on x86-64 (the rows memtrace builds, and
// backtrace() alone); 32-bit ARM has only backtrace() (its unwind
// information is .ARM.exidx, which the rows do not describe), and the
// test holds the library to that.
func TestCrossDwarfOraclePreload(t *testing.T) {
	if testing.Short() {
		t.Skip("runs memtrace and the oracle under qemu-user, 16 runs: make test runs it")
	}
	for _, a := range crossArchs {
		t.Run(a.name, func(t *testing.T) {
			requireCross(t, a.triplet, a.qemu)
			memtrace := crossMemtrace(t, a.name)
			exe := crossOracle(t, a.triplet)
			registerQemu(t, a.name, a.qemu)
			sysroot := "/usr/" + a.triplet
			walks := []string{"rows", "backtrace"}
			if a.name == "arm" {
				// The rows asked for (the default), and
				// backtrace() what the library must take.
				walks = []string{"rows"}
			}
			for _, walk := range walks {
				for _, sc := range oracleScenarios {
					t.Run(walk+"/"+sc.name, func(t *testing.T) {
						r := newRun(t)
						args := append(append([]string{"-v", "--preload", "--stack-depth", strconv.Itoa(oracleDepth), "-o", r.log}, followFor(sc.args)...), "--", exe)
						args = append(args, sc.args...)
						env := []string{"MEMTRACE_WALK=" + walk}
						if walk == "rows" && a.name != "arm" {
							// The tables are built under qemu too:
							// the program waits for them (see
							// unwind_oracle.cc).
							env = append(env, "UNWIND_ORACLE_PAUSE_MS=2000")
						}
						r.runGuestMemtrace(t, a.qemu, sysroot, memtrace, env, args...)
						if m := logMode(t, r.log); m != "preload" {
							t.Fatalf("the log says mode=%s, want preload", m)
						}
						rows, bt := preloadWalks(t, r.stderr.String())
						t.Logf("%d stacks over the rows, %d by backtrace()", rows, bt)
						switch {
						case a.name == "arm" && (rows != 0 || bt == 0):
							t.Fatalf("32-bit ARM: %d stacks over the rows, %d by backtrace(), want all by backtrace()", rows, bt)
						case walk == "backtrace" && (rows != 0 || bt == 0):
							t.Fatalf("MEMTRACE_WALK=backtrace: %d stacks over the rows, %d by backtrace()", rows, bt)
						case a.name != "arm" && walk == "rows" && (rows == 0 || bt*10 > rows+bt):
							t.Fatalf("MEMTRACE_WALK=rows: %d stacks over the rows, %d by backtrace(), want 90 %% over the rows", rows, bt)
						}
						fr := newFrameResolver()
						fr.sysroot = sysroot
						if a.name == "arm" {
							fr.cut = cutAtCantUnwind(t)
						}
						checkOracleWith(t, fr, r, oracleDepth, oracleThreads(sc.args))
						if sc.name == "plain" && !t.Failed() {
							crossCatches(t, fr, r)
						}
					})
				}
			}
			// Informative (docs/measurements.md): the oracle's events
			// per second of its run under qemu, without stacks and
			// with them (the default walk, no pause).
			t.Run("rate", func(t *testing.T) {
				for _, depth := range []int{0, oracleDepth} {
					r := newRun(t)
					r.runGuestMemtrace(t, a.qemu, sysroot, memtrace, nil,
						"--preload", "--stack-depth", strconv.Itoa(depth), "-o", r.log, "--", exe)
					n, d := summaryRate(t, r.log)
					t.Logf("--stack-depth %d: %d events in %v: %.0f events/s", depth, n, d.Round(time.Millisecond), float64(n)/d.Seconds())
				}
			})
		})
	}
}

// crossCatches: the comparison of a passing run fails once one frame is
// off, and on 32-bit ARM the cut allowance takes no other stack: a
// program stack cut to one frame with the reason, or a cut stack without
// it.
func crossCatches(t *testing.T, fr *frameResolver, r *run) {
	t.Helper()
	recs := readOracleRun(t, r.truth)
	var deep, cut *dwarfEvent
	_, byTID := readDwarfLog(t, r.log)
	compareOracle(fr, byTID, recs, oracleDepth) // sets each record's log line
	byLine := map[int]*dwarfEvent{}
	for _, evs := range byTID {
		for _, e := range evs {
			byLine[e.line] = e
		}
	}
	for _, rec := range recs {
		if e := byLine[rec.matchedLogLine]; rec.matchedLogLine != 0 && cut == nil && rec.hasStack() && e.truncated == "no-unwind-info" {
			cut = e
		}
	}
	for _, rec := range recs {
		if rec.kind == "d" && !rec.mainThread && len(rec.pcs) > 40 && rec.matchedLogLine != 0 {
			deep = byLine[rec.matchedLogLine]
			break
		}
	}
	if deep == nil {
		t.Fatal("no deep worker allocation in the record")
	}
	type change struct {
		name string
		ev   *dwarfEvent
		fn   func(e *dwarfEvent)
	}
	changes := []change{{"one outer frame off by one", deep, func(e *dwarfEvent) { e.frames[17].addr++ }}}
	if fr.cut != nil {
		if cut == nil {
			t.Fatal("32-bit ARM: no stack marked reason=no-unwind-info (the first read's buffer, inside _IO_file_doallocate, is one)")
		}
		changes = append(changes,
			change{"a program stack cut to one frame, marked no-unwind-info", deep, func(e *dwarfEvent) {
				e.frames, e.truncated = e.frames[:1], "no-unwind-info"
			}},
			change{"a cut stack without its reason", cut, func(e *dwarfEvent) { e.truncated = "" }})
	}
	for _, c := range changes {
		saved := *c.ev
		c.ev.frames = append([]stackFrame(nil), c.ev.frames...)
		c.fn(c.ev)
		res := compareOracle(fr, byTID, recs, oracleDepth)
		*c.ev = saved
		if len(res.errs) == 0 {
			t.Errorf("a log with %s passes the comparison", c.name)
			continue
		}
		t.Logf("caught: %s: %s", c.name, res.errs[0])
	}
}

// cutAtCantUnwind is 32-bit ARM's allowance (mt_abi.h MT_STOP_NO_INFO):
// glibc's backtrace() there walks .ARM.exidx, and ends, without a frame
// for it, at a function whose entry is EXIDX_CANTUNWIND (much of libc:
// stdio's buffer allocation, _IO_file_doallocate, is one); when that is
// the allocation's caller, the library's stack is that caller alone,
// marked reason=no-unwind-info. A differing stack passes only as exactly
// that: one frame, the reason, and its call inside a CANTUNWIND entry of
// its file.
func cutAtCantUnwind(t *testing.T) func(fr *frameResolver, ev *dwarfEvent) bool {
	tables := map[string][]exidxEntry{}
	return func(fr *frameResolver, ev *dwarfEvent) bool {
		if len(ev.frames) != 1 || ev.truncated != "no-unwind-info" {
			return false
		}
		f := ev.frames[0]
		l := fr.locate(f)
		if l.mod == nil {
			return false
		}
		path := fr.hostPath(f.module)
		ents, ok := tables[path]
		if !ok {
			var err error
			if ents, err = readExidx(path); err != nil {
				t.Errorf("%v", err)
			}
			tables[path] = ents
		}
		return cantUnwindAt(ents, l.vaddr-1)
	}
}

// exidxEntry is one .ARM.exidx entry: the function start it covers from
// (up to the next entry's) and whether it says EXIDX_CANTUNWIND.
type exidxEntry struct {
	start uint64
	cant  bool
}

// readExidx reads an ARM ELF file's .ARM.exidx (ARM EHABI §6: pairs of
// words, a prel31 offset to the function, then 1 for CANTUNWIND, an
// inline rule, or a prel31 offset to .ARM.extab).
func readExidx(path string) ([]exidxEntry, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(".ARM.exidx")
	if sec == nil {
		return nil, fmt.Errorf("%s has no .ARM.exidx", path)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("read %s's .ARM.exidx: %w", path, err)
	}
	var out []exidxEntry
	for i := 0; i+8 <= len(data); i += 8 {
		w0 := binary.LittleEndian.Uint32(data[i:])
		off := int64(int32(w0<<1) >> 1) // prel31, sign-extended
		out = append(out, exidxEntry{start: uint64(int64(sec.Addr) + int64(i) + off), cant: binary.LittleEndian.Uint32(data[i+4:]) == 1})
	}
	return out, nil
}

// cantUnwindAt says whether the entry covering vaddr is CANTUNWIND (the
// entries are sorted by start, as the unwinder's binary search needs).
func cantUnwindAt(ents []exidxEntry, vaddr uint64) bool {
	i := sort.Search(len(ents), func(i int) bool { return ents[i].start > vaddr })
	return i > 0 && ents[i-1].cant
}

// summaryRate reads a log's summary line: events applied and the run's
// duration.
func summaryRate(t *testing.T, path string) (events int, d time.Duration) {
	t.Helper()
	f := summaryFields(t, path)
	ev, _ := logfmt.Field(f, "events")
	us, _ := logfmt.Field(f, "duration_us")
	n, e1 := strconv.Atoi(ev)
	u, e2 := strconv.ParseInt(us, 10, 64)
	if e1 != nil || e2 != nil {
		t.Fatalf("%s: the summary line's events=%q duration_us=%q", path, ev, us)
	}
	return n, time.Duration(u) * time.Microsecond
}

// summaryFields are the fields of the log's summary line.
func summaryFields(t *testing.T, path string) []logfmt.KV {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sc := logfmt.NewScanner(bytes.NewReader(b))
	var l logfmt.Line
	for sc.Scan() {
		if l.Parse(sc.Line()) == nil && l.Kind == logfmt.KindMeta && string(l.Word) == logfmt.WordSummary {
			return logfmt.Fields(l.Rest)
		}
	}
	t.Fatalf("%s has no summary line", path)
	return nil
}
