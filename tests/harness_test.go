package tests

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/logfmt"
)

// repoRoot is the directory holding go.mod, found from the test's directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("cannot find the repository root (go.mod) above the test directory")
		}
		dir = parent
	}
}

// need returns path under the repository, failing with what to run when it
// is missing.
func need(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(repoRoot(t), rel)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run make build progs first", rel)
	}
	return p
}

func requireBPF(t testing.TB) {
	t.Helper()
	bpftest.Require(t)
}

// bpfLog reads a log that the eBPF tracer must have written, and fails t
// (bpftest.RequireModeBPF) if memtrace fell back to LD_PRELOAD instead.
func bpfLog(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the log: %v", err)
	}
	bpftest.RequireModeBPF(t, b)
	return b
}

// truthRec is one line of a program's record (progs/truth.h).
type truthRec struct {
	tid  int64
	op   string
	size uint64
	ptr  uint64
	name string // "" when the program did not name the thread
	line int
}

func readTruth(path string) ([]truthRec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the program's record: %w", err)
	}
	var out []truthRec
	for i, ln := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(ln)
		if len(f) != 5 {
			return nil, fmt.Errorf("%s:%d: bad record %q", path, i+1, ln)
		}
		tid, err1 := strconv.ParseInt(f[0], 10, 64)
		size, err2 := strconv.ParseUint(f[2], 10, 64)
		ptr, err3 := strconv.ParseUint(strings.TrimPrefix(f[3], "0x"), 16, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("%s:%d: bad record %q", path, i+1, ln)
		}
		name := f[4]
		if name == "-" {
			name = ""
		}
		out = append(out, truthRec{tid, f[1], size, ptr, name, i + 1})
	}
	return out, nil
}

// logEvent is one alloc, free or EXIT line of a log.
type logEvent struct {
	kind  logfmt.Kind
	tid   int64
	name  string
	op    string
	size  uint64
	total uint64
	ptr   uint64
	ts    uint64
	line  int
	used  bool
}

func (e *logEvent) String() string {
	return fmt.Sprintf("line %d: tid=%d (%s) %s size=%d ptr=%#x", e.line, e.tid, e.name, e.op, e.size, e.ptr)
}

type parsedLog struct {
	events []*logEvent
	byTID  map[int64][]*logEvent
	forks  map[int64]bool // pids announced by [memtrace] proc event=fork
	// notFollowed: the pids of proc event=untraced lines that say the
	// process was not followed, with their ppid=.
	notFollowed map[int64]int64
	header      bool
	nMeta       int
	rawLines    int
}

// parseLog reads a log through logfmt only. Any malformed line fails.
func parseLog(path string) (*parsedLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open the log: %w", err)
	}
	defer f.Close()
	return parseLogFrom(path, f)
}

// parseLogFrom is parseLog over r, the log at path.
func parseLogFrom(path string, r io.Reader) (*parsedLog, error) {
	pl := &parsedLog{byTID: map[int64][]*logEvent{}, forks: map[int64]bool{}, notFollowed: map[int64]int64{}}
	sc := logfmt.NewScanner(r)
	var l logfmt.Line
	n := 0
	for sc.Scan() {
		n++
		if err := l.Parse(sc.Line()); err != nil {
			return nil, fmt.Errorf("%s:%d: %w: %q", path, n, err, sc.Line())
		}
		switch l.Kind {
		case logfmt.KindAlloc, logfmt.KindFree, logfmt.KindExit:
			e := &logEvent{kind: l.Kind, tid: l.TID, name: string(l.Name), op: string(l.OpText),
				size: l.Size, total: l.Total, ptr: l.Ptr, ts: l.TS, line: n}
			pl.events = append(pl.events, e)
			pl.byTID[e.tid] = append(pl.byTID[e.tid], e)
		case logfmt.KindMeta:
			pl.nMeta++
			kv := logfmt.Fields(l.Rest)
			switch string(l.Word) {
			case logfmt.WordHeader:
				pl.header = true
			case logfmt.WordProc:
				ev, _ := logfmt.Field(kv, "event")
				p, ok := logfmt.Field(kv, "pid")
				pid, _ := strconv.ParseInt(p, 10, 64)
				switch {
				case !ok:
				case ev == logfmt.ProcFork:
					pl.forks[pid] = true
				case ev == logfmt.ProcUntraced:
					if r, _ := logfmt.Field(kv, "reason"); r == logfmt.ReasonNotFollowed {
						pp, _ := logfmt.Field(kv, "ppid")
						pl.notFollowed[pid], _ = strconv.ParseInt(pp, 10, 64)
					}
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	pl.rawLines = n
	return pl, nil
}

// compareOpts says what a mode promises beyond the per-thread checks.
type compareOpts struct {
	// exits: every thread that recorded "exit" has an EXIT line.
	exits bool
}

// compare checks the log against the record: for every record there is
// exactly one matching event (same tid, op, size, ptr) in the thread's
// order; between a thread's first and last record the log holds no event
// the record does not name, except after a "gap" record; names match where
// the program set them; timestamps never go back within a thread; an EXIT
// line's total is the sum of the thread's logged allocations.
func compare(pl *parsedLog, truth []truthRec, o compareOpts) []string {
	var errs []string
	fail := func(format string, a ...any) {
		if len(errs) < 25 {
			errs = append(errs, fmt.Sprintf(format, a...))
		}
	}
	byTID := map[int64][]truthRec{}
	var tids []int64
	for _, r := range truth {
		if _, ok := byTID[r.tid]; !ok {
			tids = append(tids, r.tid)
		}
		byTID[r.tid] = append(byTID[r.tid], r)
	}
	sort.Slice(tids, func(i, j int) bool { return tids[i] < tids[j] })
	for _, tid := range tids {
		recs := byTID[tid]
		evs := pl.byTID[tid]
		for i := 1; i < len(evs); i++ {
			if evs[i].ts < evs[i-1].ts {
				fail("tid %d: time goes back at log %v (after ts %d)", tid, evs[i], evs[i-1].ts)
				break
			}
		}
		cur := 0
		gapOpen := true // before the first record anything goes (start-up)
		exited, allocated := false, false
		for _, r := range recs {
			if r.op != "gap" && r.op != "exit" {
				allocated = true
			}
			switch r.op {
			case "gap":
				gapOpen = true
				continue
			case "exit":
				exited = true
				continue
			}
			j := cur
			for ; j < len(evs); j++ {
				e := evs[j]
				if e.kind != logfmt.KindExit && e.op == r.op && e.size == r.size && e.ptr == r.ptr {
					break
				}
			}
			if j == len(evs) {
				fail("tid %d: record line %d (%s size=%d ptr=%#x) has no matching log event after log line %d",
					tid, r.line, r.op, r.size, r.ptr, lineOf(evs, cur))
				continue
			}
			if !gapOpen {
				for k := cur; k < j; k++ {
					fail("tid %d: log %v is not in the record (between record lines %d and the one before)", tid, evs[k], r.line)
				}
			}
			e := evs[j]
			e.used = true
			if r.name != "" && e.name != r.name {
				fail("tid %d: log %v: thread name %q, the program had set %q", tid, e, e.name, r.name)
			}
			cur = j + 1
			gapOpen = false
		}
		if exited {
			var sum uint64
			found := false
			for k := cur; k < len(evs); k++ {
				if evs[k].kind == logfmt.KindExit {
					found = true
					for _, a := range evs[:k] {
						if a.kind == logfmt.KindAlloc {
							sum += a.size
						}
					}
					if evs[k].total != sum {
						fail("tid %d: EXIT total=%d, but the thread's logged allocations add up to %d", tid, evs[k].total, sum)
					}
					break
				}
			}
			// memtrack writes EXIT only for a thread that allocated or
			// freed; a thread that never did (forkmt's churn thread
			// starting after the stop flag) has no line at all.
			if !found && o.exits && allocated {
				fail("tid %d: the thread ended but the log has no EXIT line for it after its last event", tid)
			}
		}
	}
	return errs
}

func lineOf(evs []*logEvent, i int) int {
	if i > 0 && i <= len(evs) {
		return evs[i-1].line
	}
	return 0
}

// run is one program's run in one mode.
type run struct {
	log, truth string
	stderr     bytes.Buffer
	// closing turns the closing check on for this run's memtrace where
	// TestMain left it off (-short).
	closing bool
	// unfollowed: the run had no --follow, so no forked child may be in
	// the log at all (check).
	unfollowed bool
}

// bothPaths runs f as two subtests, bpf and preload, with the flags that
// choose the path (none, or --preload); the bpf one needs BPF, and f
// asserts mode=bpf in its log (bpfLog) where it reads one.
func bothPaths(t *testing.T, f func(t *testing.T, pre []string, bpf bool)) {
	for _, path := range []string{"bpf", "preload"} {
		t.Run(path, func(t *testing.T) {
			if path == "bpf" {
				requireBPF(t)
				f(t, nil, true)
				return
			}
			f(t, []string{"--preload"}, false)
		})
	}
}

func newRun(t *testing.T) *run {
	dir := t.TempDir()
	return &run{log: filepath.Join(dir, "log"), truth: filepath.Join(dir, "truth")}
}

// check compares the log with the program's record and with the records
// of its forked children: a child the log announces (proc event=fork) must
// be exact; one it does not must have no event at all (requireFollow makes
// following mandatory, r.unfollowed forbids it).
func (r *run) check(t *testing.T, requireFollow bool) {
	t.Helper()
	pl, err := parseLog(r.log)
	if err != nil {
		t.Fatalf("%v\nstderr: %s", err, r.stderr.String())
	}
	truth, err := readTruth(r.truth)
	if err != nil {
		t.Fatalf("%v\nstderr: %s", err, r.stderr.String())
	}
	if !pl.header {
		t.Errorf("the log has no [memtrace] header line")
	}
	errs := compare(pl, truth, compareOpts{exits: true})
	children, _ := filepath.Glob(r.truth + ".child.*")
	for _, c := range children {
		pid, _ := strconv.ParseInt(c[strings.LastIndex(c, ".")+1:], 10, 64)
		ct, err := readTruth(c)
		if err != nil {
			t.Fatal(err)
		}
		_, said := pl.notFollowed[pid]
		switch {
		case pl.forks[pid] && r.unfollowed:
			errs = append(errs, fmt.Sprintf("forked child %d is in the log of a run without --follow", pid))
		case r.unfollowed && !said:
			errs = append(errs, fmt.Sprintf("forked child %d: a run without --follow has no proc event=untraced line for it", pid))
		case r.unfollowed && len(pl.byTID[pid]) > 0:
			errs = append(errs, fmt.Sprintf("forked child %d is not followed but the log has %d events of it", pid, len(pl.byTID[pid])))
		case pl.forks[pid] && said:
			errs = append(errs, fmt.Sprintf("forked child %d is followed and also said not to be", pid))
		case pl.forks[pid]:
			errs = append(errs, compare(pl, ct, compareOpts{exits: true})...)
		case requireFollow:
			errs = append(errs, fmt.Sprintf("forked child %d: the log has no [memtrace] proc event=fork line for it", pid))
		default:
			if n := len(pl.byTID[pid]); n > 0 {
				errs = append(errs, fmt.Sprintf("forked child %d is not announced but the log has %d events of it", pid, n))
			}
		}
	}
	if len(truth) == 0 {
		errs = append(errs, "the program recorded nothing")
	}
	for _, e := range errs {
		t.Error(e)
	}
	if t.Failed() {
		t.Logf("log: %s (%d lines), stderr: %s", r.log, pl.rawLines, r.stderr.String())
		keep(t, r)
	}
}

// keep copies a failing run's files where a developer can read them.
func keep(t *testing.T, r *run) {
	dir := os.Getenv("MEMTRACE_TEST_KEEP")
	if dir == "" {
		return
	}
	name := strings.ReplaceAll(t.Name(), "/", "_")
	// A forked child's and an exec'd-from image's records too
	// (readOracleRun).
	for _, f := range []string{r.log, r.truth, r.truth + ".child", r.truth + ".pre"} {
		if data, err := os.ReadFile(f); err == nil {
			_ = os.WriteFile(filepath.Join(dir, name+"."+filepath.Base(f)), data, 0o644)
		}
	}
}

// runCmd runs cmd with a deadline, so that a deadlock fails the test
// instead of hanging the suite.
func runCmd(t *testing.T, cmd *exec.Cmd, limit time.Duration) error {
	t.Helper()
	if err := cmd.Start(); err != nil {
		return err
	}
	return runWait(cmd, limit)
}

// runWait waits for a started command, killing it after limit. The error
// then says what each of its threads (and its descendants') was doing
// (threadDump): a hang that comes once in hundreds of runs is read from
// the one CI log that shows it.
func runWait(cmd *exec.Cmd, limit time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		dump := threadDump(cmd.Process.Pid)
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s did not finish within %v (deadlock?); its threads then:\n%s", cmd.Path, limit, dump)
	}
}

// waitLine reads r until a line equal to want arrives.
func waitLine(r io.Reader, want string, limit time.Duration) error {
	found := make(chan error, 1)
	go func() {
		br := bufio.NewReader(r)
		for {
			s, err := br.ReadString('\n')
			if strings.TrimSpace(s) == want {
				found <- nil
				_, _ = io.Copy(io.Discard, br)
				return
			}
			if err != nil {
				found <- fmt.Errorf("stream ended before %q: %w", want, err)
				return
			}
		}
	}()
	select {
	case err := <-found:
		return err
	case <-time.After(limit):
		return fmt.Errorf("no %q within %v", want, limit)
	}
}

// waitHeader polls a log until memtrace has written its header line (after
// the probes are attached).
func waitHeader(ctx context.Context, path string) error {
	for {
		if data, err := os.ReadFile(path); err == nil {
			sc := logfmt.NewScanner(bytes.NewReader(data))
			var l logfmt.Line
			for sc.Scan() {
				if l.Parse(sc.Line()) == nil && l.Kind == logfmt.KindMeta && string(l.Word) == logfmt.WordHeader {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("memtrace wrote no header to %s: %w", path, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
