package tests

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestWalkReusePreload: the library's walk takes a thread's outer frames
// from its previous walk only where walking on would give the same
// frames. walk_reuse (progs/walk_reuse.c) allocates where that is
// tempting and wrong: the same stack pointer under another return
// address, a saved return address that changed under equal inner frames,
// depths going up and down, a frame-pointer frame of changing size,
// longjmp over abandoned frames, a coroutine's stack, a signal handler.
// Every allocation's stack equals its backtrace() record, frame for frame,
// at a depth limit that cuts the deep stacks and at one that does not, and
// in a forked child (which starts with its parent's record), and with a
// stack table of 8 ids, which starts over many times a thread; a stack is
// marked cut exactly where the limit cut it; and -v's count shows that
// most frames were reused, so that a walk that never reuses fails too.
func TestWalkReusePreload(t *testing.T) {
	memtrace := need(t, "bin/memtrace")
	exe := need(t, "tests/progs/build/walk_reuse")
	for _, c := range []struct {
		name    string
		depth   int
		args    []string
		threads int
		env     string
	}{
		{"depth64", 64, nil, 3, ""},
		{"depth16", 16, nil, 3, ""},
		{"fork", 24, []string{"fork"}, 6, ""},
		{"ids8", 64, nil, 3, "MEMTRACE_STACK_IDS=8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRun(t)
			args := append(append([]string{"-v", "--preload", "--stack-depth", strconv.Itoa(c.depth), "-o", r.log}, followFor(c.args)...), "--", exe)
			args = append(args, c.args...)
			// The pause: the tables are built before the first stacks
			// (see TestDwarfOraclePreload).
			env := []string{"UNWIND_ORACLE_PAUSE_MS=300"}
			if c.env != "" {
				env = append(env, c.env)
			}
			r.runMemtraceEnv(t, memtrace, env, args...)
			checkReuse(t, r.stderr.String())
			_, recs, byTID := checkOracle(t, r, c.depth, c.threads)
			checkCut(t, recs, byTID, c.depth)
		})
	}
}

// TestWalkReuseTwoHooksPreload: a loop's malloc and free start their
// walks from two hooks, at two call sites; each keeps its own walk, so
// that after the first of each every frame is reused (bench_loop: a kept
// walk per thread made each hook's walk evict the other's, and only the
// frames outside main were reused, 3 of 4).
func TestWalkReuseTwoHooksPreload(t *testing.T) {
	memtrace := need(t, "bin/memtrace")
	exe := need(t, "tests/progs/build/bench_loop")
	r := newRun(t)
	r.runMemtraceEnv(t, memtrace, nil, "-v", "--preload", "-o", r.log, "--", exe, "20000", "64")
	frames, reused := reusedFrames(t, r.stderr.String())
	t.Logf("%d of %d frames reused from the thread's previous walks", reused, frames)
	// The walks before the loop's (the program's start) and the first
	// of each hook's have nothing to reuse.
	if frames < 4*40000 || frames-reused > 64 {
		t.Errorf("%d of %d frames reused over 40,000 stacks: want all but the first walks'", reused, frames)
	}
}

// TestCrossWalkReusePreload: TestWalkReusePreload's program on arm64,
// under qemu-user, where the return address comes in x30 and reuse must
// hold the walk's lr to the kept one's where the rest depends on it.
func TestCrossWalkReusePreload(t *testing.T) {
	if testing.Short() {
		t.Skip("runs memtrace and the program under qemu-user: make test runs it")
	}
	a := crossArchs[0]
	requireCross(t, a.triplet, a.qemu)
	memtrace := crossMemtrace(t, a.name)
	root := repoRoot(t)
	prog := filepath.Join("build", a.triplet, "walk_reuse")
	cmd := command("make", "-s", "-C", "tests/progs", "CROSS="+a.triplet, prog)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %v: %v\n%s", cmd.Args[1:], err, out)
	}
	exe := filepath.Join(root, "tests/progs", prog)
	registerQemu(t, a.name, a.qemu)
	sysroot := "/usr/" + a.triplet
	for _, depth := range []int{64, 16} {
		t.Run("depth"+strconv.Itoa(depth), func(t *testing.T) {
			r := newRun(t)
			// The tables are built under qemu too: the program waits
			// for them.
			r.runGuestMemtrace(t, a.qemu, sysroot, memtrace, []string{"UNWIND_ORACLE_PAUSE_MS=2000"},
				"-v", "--preload", "--stack-depth", strconv.Itoa(depth), "-o", r.log, "--", exe)
			checkReuse(t, r.stderr.String())
			fr := newFrameResolver()
			fr.sysroot = sysroot
			_, recs, byTID := checkOracleWith(t, fr, r, depth, 3)
			checkCut(t, recs, byTID, depth)
		})
	}
}

// checkReuse: nearly every stack went over the rows, and most of their
// frames came from the thread's previous walk (memtrace -v).
func checkReuse(t *testing.T, stderr string) {
	t.Helper()
	rows, bt := preloadWalks(t, stderr)
	if rows == 0 || bt*10 > rows+bt {
		t.Errorf("%d stacks over the rows, %d by backtrace(): want the rows' walk for nearly all", rows, bt)
	}
	frames, reused := reusedFrames(t, stderr)
	t.Logf("%d of %d frames reused from the thread's previous walk", reused, frames)
	if reused*2 < frames {
		t.Errorf("%d of %d frames reused: the repeated stacks should have taken most of theirs from the previous walk", reused, frames)
	}
}

// reusedFrames reads memtrace -v's count of the frames the library's walk
// took from a thread's previous walk, of all it walked over the rows.
func reusedFrames(t *testing.T, stderr string) (frames, reused int) {
	t.Helper()
	preloadStacksPart(t, stderr, "%d frames of %d reused from the thread's previous walk", &reused, &frames)
	return frames, reused
}

// preloadStacksPart reads one "; "-separated part of memtrace -v's
// "preload stacks" line, the one format matches, into a and b.
func preloadStacksPart(t *testing.T, stderr, format string, a, b *int) {
	t.Helper()
	for _, ln := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(ln, "memtrace: preload stacks: ") {
			continue
		}
		for _, part := range strings.Split(ln, "; ") {
			if _, err := fmt.Sscanf(part, format, a, b); err == nil {
				return
			}
		}
	}
	t.Fatalf("memtrace -v has no %q in its preload stacks line:\n%s", format, stderr)
}

// checkCut: an allocation's stack is marked cut where the depth limit cut
// it (backtrace() found more frames than the limit, with room for the
// start-up frames a walk may stop before), and not where it is shorter
// than the limit. The stop is the one part of a reused walk that the
// frames themselves do not show.
func checkCut(t *testing.T, recs []*oracleRec, byTID map[int64][]*dwarfEvent, depth int) {
	t.Helper()
	byLine := map[int]*dwarfEvent{}
	for _, evs := range byTID {
		for _, e := range evs {
			byLine[e.line] = e
		}
	}
	bad := 0
	for _, r := range recs {
		e := byLine[r.matchedLogLine]
		if !r.hasStack() || e == nil {
			continue
		}
		var why string
		switch {
		case len(e.frames) < depth && e.truncated != "":
			why = fmt.Sprintf("%d frames, under the limit %d, but marked cut (%s)", len(e.frames), depth, e.truncated)
		case len(e.frames) == depth && len(r.pcs) > depth+2 && e.truncated == "":
			why = fmt.Sprintf("%d frames, the limit, of the %d backtrace() found, but not marked cut", len(e.frames), len(r.pcs))
		}
		if why != "" {
			if bad++; bad <= 20 {
				t.Errorf("record %v, log line %d: %s", r, e.line, why)
			}
		}
	}
}

// TestWalkReuseBPF: TestWalkReusePreload's program on the eBPF path,
// whose DWARF walk replays the steps of the previous walk on the CPU
// where its registers, mappings and stack words are the same
// (docs/unwind.md): every allocation's stack equals its backtrace()
// record, a stack is marked cut exactly where the limit cut it, in a
// --follow'ed forked child too; and -v's count shows that most steps were
// replayed, so that a walk that never replays fails too. Under the compat
// build (MEMTRACE_BPF_COMPAT=1, or a kernel before 5.17: the log's header
// says probes=uprobe_compat), which walks without replay, the stacks are
// checked and the count is not. The fork is the kernel matrix's
// walk-reuse check: on Debian's 6.1 each return of the child's (and then
// the parent's) functions ran the return probes of both processes' links,
// and a new thread's first malloc was logged with the address its inner
// mmap returned (bpf/memtrace.bpf.c, mt_return).
func TestWalkReuseBPF(t *testing.T) {
	requireBPF(t)
	memtrace := need(t, "bin/memtrace")
	exe := need(t, "tests/progs/build/walk_reuse")
	for _, c := range []struct {
		name    string
		depth   int
		args    []string
		threads int
		flags   []string
	}{
		{"depth64", 64, nil, 3, nil},
		{"depth16", 16, nil, 3, nil},
		{"fork", 24, []string{"fork"}, 6, nil},
		// Classic links (the default below 6.6) on any kernel: the
		// return links' pid cookie passes each process's own returns
		// where the kernel filters them too.
		{"fork-classic", 24, []string{"fork"}, 6, []string{"--no-uprobe-multi"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRun(t)
			args := append([]string{"-v", "--stack-depth", strconv.Itoa(c.depth), "-o", r.log}, c.flags...)
			if c.args != nil {
				args = append(args, "--follow")
			}
			args = append(append(args, "--", exe), c.args...)
			r.runMemtrace(t, memtrace, args)
			header, _, _ := strings.Cut(string(bpfLog(t, r.log)), "\n")
			_, recs, byTID := checkOracle(t, r, c.depth, c.threads)
			checkCut(t, recs, byTID, c.depth)
			if strings.Contains(header, " probes=uprobe_compat") {
				return
			}
			var replayed, steps int
			for _, ln := range strings.Split(r.stderr.String(), "\n") {
				if _, err := fmt.Sscanf(ln, "memtrace: DWARF walk: %d steps of %d replayed from the previous walk", &replayed, &steps); err == nil {
					break
				}
			}
			t.Logf("%d of %d steps replayed from the previous walk", replayed, steps)
			if steps == 0 || replayed*2 < steps {
				t.Errorf("%d of %d steps replayed: the repeated stacks should have replayed most of theirs", replayed, steps)
			}
		})
	}
}
