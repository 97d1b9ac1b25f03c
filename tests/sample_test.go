package tests

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/memtrace/memtrace/internal/bpftest"
)

var sampleSites = []string{"site_small", "site_medium", "site_large"}

// TestSampleAccuracy: progs/sample_churn's heap (three sites of 16 B to
// 8 KiB blocks, about 105 MB live after some 430k events of churn), traced
// with --sample 64K into -o FILE.pb.gz, is estimated within 3 points of
// each site's true share of the live bytes and within 10 % of their total,
// in each of 10 runs of different seeds, on both paths (docs/sampling.md).
// Sampling spreads a share by sqrt(rate/total * share * (1 - share)): some
// 0.75 points for the largest site, so 3 points is four of them; and a
// weighing that lost the small blocks would miss the small sites' 5 % each.
func TestSampleAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("10 traced runs of 105 MB heaps on each path")
	}
	for _, mode := range sampleModes {
		t.Run(mode, func(t *testing.T) { sampleAccuracy(t, mode) })
	}
}

// sampleModes are the two capture paths, each with its own countdown
// (bpf/mt_sample.h, fallback-preload/c/sample.c) over one draw.
var sampleModes = []string{"bpf", "preload"}

// sampleArgs are memtrace's arguments for mode.
func sampleArgs(t *testing.T, mode string, args ...string) []string {
	if mode == "preload" {
		return append([]string{"--preload"}, args...)
	}
	requireBPF(t)
	return args
}

// TestSampleAccuracyAllocators: the same bounds under jemalloc, tcmalloc
// and mimalloc (preloaded into the program), three runs each. An unsampled
// malloc or calloc goes without its return probe on eBPF (bpf/memtrace.bpf.c,
// do_enter), which holds only while the allocator's malloc calls no other
// probed function inside: one that did would be counted down twice and
// its sites overestimated, by up to twice.
func TestSampleAccuracyAllocators(t *testing.T) {
	if testing.Short() {
		t.Skip("traced runs of 105 MB heaps under three allocators, on each path")
	}
	for _, a := range allocLibs {
		if a.lib == "" {
			continue
		}
		lib := allocLibPath(t, a.lib)
		for _, mode := range sampleModes {
			t.Run(a.name+"/"+mode, func(t *testing.T) { sampleAccuracyRuns(t, mode, 3, allocChurnSteps, "LD_PRELOAD="+lib) })
		}
	}
}

// allocChurnSteps is sample_churn's churn under the other allocators: the
// heap whose estimate is checked is the same as at its default, and a
// quarter of the churn still frees and reallocates most of the start's
// blocks, matched against the samples; the default's churn is
// TestSampleAccuracy's.
const allocChurnSteps = 60000

func sampleAccuracy(t *testing.T, mode string) {
	sampleAccuracyRuns(t, mode, 10, 0)
}

// sampleAccuracyRuns traces sample_churn runs times (seeds 1..runs) with
// steps of churn (0: its default), with env added to the program's
// environment, and holds each profile to the bounds of TestSampleAccuracy.
func sampleAccuracyRuns(t *testing.T, mode string, runs, steps int, env ...string) {
	bin, prog := need(t, "bin/memtrace"), need(t, "tests/progs/build/sample_churn")
	dir := t.TempDir()
	for run := 1; run <= runs; run++ {
		out := filepath.Join(dir, "run"+strconv.Itoa(run)+".pb.gz")
		var stdout, stderr bytes.Buffer
		args := []string{"--sample", "64K", "--stack-depth", "16", "-o", out, "--", prog, strconv.Itoa(run)}
		if steps > 0 {
			args = append(args, strconv.Itoa(steps))
		}
		cmd := command(bin, sampleArgs(t, mode, args...)...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := runCmd(t, cmd, 2*time.Minute); err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, stderr.String())
		}
		truth := sampleTruth(t, stdout.String())
		est := sampleEstimate(t, out, mode)
		if p := profilePeriod(t, out); p != 64<<10 {
			t.Fatalf("run %d: the profile's period is %d, want the rate 65536", run, p)
		}
		var trueTotal, estTotal float64
		for _, s := range sampleSites {
			trueTotal += truth[s]
			estTotal += est[s]
		}
		if d := math.Abs(estTotal-trueTotal) / trueTotal; d > 0.10 {
			t.Errorf("run %d: estimated %.0f live bytes at the three sites, truly %.0f (%.1f %% off)", run, estTotal, trueTotal, 100*d)
		}
		shares := ""
		for _, s := range sampleSites {
			want, got := 100*truth[s]/trueTotal, 100*est[s]/estTotal
			if math.Abs(got-want) > 3 {
				t.Errorf("run %d: %s holds %.2f %% of the estimate, truly %.2f %%", run, s, got, want)
			}
			shares += fmt.Sprintf(" %s %.2f%% (true %.2f%%)", s, got, want)
		}
		t.Logf("run %d: %.1f MB estimated, %.1f MB true;%s", run, estTotal/1e6, trueTotal/1e6, shares)
	}
}

// TestSampleRateOne: at --sample 1 a block of 16 bytes or more is a
// sample but for a chance of e^-16 and weighs 1 + e^-16, so the profile is
// the exact heap: each site's live bytes and blocks as the program counts
// them, after 215,000 frees and reallocs each matched in BPF against the
// sampled blocks. (A block left unsampled, some 1 in 10^7, is allowed
// for: one block's bytes.)
func TestSampleRateOne(t *testing.T) {
	if testing.Short() {
		t.Skip("a traced run that samples every allocation, on each path")
	}
	for _, mode := range sampleModes {
		t.Run(mode, func(t *testing.T) { sampleRateOne(t, mode) })
	}
}

func sampleRateOne(t *testing.T, mode string) {
	bin, prog := need(t, "bin/memtrace"), need(t, "tests/progs/build/sample_churn")
	out := filepath.Join(t.TempDir(), "one.pb.gz")
	var stdout, stderr bytes.Buffer
	cmd := command(bin, sampleArgs(t, mode, "--sample", "1", "--stack-depth", "8", "-o", out, "--", prog, "7")...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := runCmd(t, cmd, 2*time.Minute); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "did not fit") {
		t.Fatalf("samples were lost: %s", stderr.String())
	}
	truth, blocks := sampleTruth(t, stdout.String()), sampleBlocks(t, stdout.String())
	est, objs := sampleEstimateObjects(t, out, mode)
	for _, s := range sampleSites {
		if math.Abs(est[s]-truth[s]) > 8192 || math.Abs(objs[s]-blocks[s]) > 1 {
			t.Errorf("%s: %.0f bytes in %.0f blocks in the profile, %.0f in %.0f truly", s, est[s], objs[s], truth[s], blocks[s])
		}
		t.Logf("%s: %.0f bytes in %.0f blocks in the profile, %.0f in %.0f truly", s, est[s], objs[s], truth[s], blocks[s])
	}
}

func profilePeriod(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return p.Period
}

// sampleBlocks reads sample_churn's block counts.
func sampleBlocks(t *testing.T, out string) map[string]float64 {
	t.Helper()
	n := map[string]float64{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) == 3 {
			v, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				t.Fatalf("sample_churn printed %q", l)
			}
			n[f[0]] = v
		}
	}
	return n
}

// sampleTruth reads sample_churn's "site BYTES BLOCKS" lines.
func sampleTruth(t *testing.T, out string) map[string]float64 {
	t.Helper()
	truth := map[string]float64{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("sample_churn printed %q", l)
		}
		n, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			t.Fatalf("sample_churn printed %q", l)
		}
		truth[f[0]] = n
	}
	if len(truth) != len(sampleSites) {
		t.Fatalf("sample_churn printed %q", out)
	}
	return truth
}

// sampleEstimate is the profile's in-use bytes by site: the samples whose
// stack passes through the site's function.
func sampleEstimate(t *testing.T, path, mode string) map[string]float64 {
	t.Helper()
	est, _ := sampleEstimateObjects(t, path, mode)
	return est
}

// sampleEstimateObjects is the profile's in-use bytes and blocks by site.
func sampleEstimateObjects(t *testing.T, path, mode string) (bytes, objects map[string]float64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the profile: %v", err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	if mode == "bpf" {
		bpftest.RequireProfileModeBPF(t, p)
	} else if !slices.Contains(p.Comments, "mode="+mode) {
		t.Fatalf("the profile's comments %q do not say mode=%s", p.Comments, mode)
	}
	idx, oidx := -1, -1
	for i, st := range p.SampleType {
		switch st.Type {
		case "inuse_space":
			idx = i
		case "inuse_objects":
			oidx = i
		}
	}
	if idx < 0 || oidx < 0 {
		t.Fatalf("the profile has no inuse_space or inuse_objects")
	}
	est, objs := map[string]float64{}, map[string]float64{}
	for _, s := range p.Sample {
	locs:
		for _, l := range s.Location {
			for _, ln := range l.Line {
				for _, site := range sampleSites {
					if ln.Function != nil && ln.Function.Name == site {
						est[site] += float64(s.Value[idx])
						objs[site] += float64(s.Value[oidx])
						break locs
					}
				}
			}
		}
	}
	return est, objs
}

// TestSampleRefusals: --sample with an output that is a memtrack log is
// one line and exit 2, before anything runs, on both paths.
func TestSampleRefusals(t *testing.T) {
	bin := need(t, "bin/memtrace")
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	for _, args := range [][]string{
		{"--sample", "64K", "-o", filepath.Join(dir, "x.log")},
		{"--sample", "64K", "-o", "/dev/stderr"},
		{"--sample", "64K", "--port", "1"},
		{"--sample", "64K", "--preload", "-o", filepath.Join(dir, "x.log.zst")},
		{"--sample", "0", "-o", filepath.Join(dir, "x.pb.gz")},
		{"--sample", "2G", "-o", filepath.Join(dir, "x.pb.gz")},
		{"--sample", "64K", "--floor", "-o", filepath.Join(dir, "x.pb.gz")},
		{"--sample", "64K", "--report-dir", dir, "-o", filepath.Join(dir, "x.pb.gz")},
	} {
		var stderr bytes.Buffer
		cmd := command(bin, append(args, "--", "touch", marker)...)
		cmd.Stderr = &stderr
		err := runCmd(t, cmd, time.Minute)
		var ee *exec.ExitError
		if err == nil || !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%q: %v, want exit 2", args, err)
		}
		if n := strings.Count(stderr.String(), "\n"); n != 1 || !strings.HasPrefix(stderr.String(), "memtrace: ") {
			t.Errorf("%q: want one line, got %q", args, stderr.String())
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("%q: the program ran", args)
			os.Remove(marker)
		}
	}
}

// TestSampleDefaultProfile: --sample without -o writes its profile as
// heaptrack names its file, memtrace.PROG.PID.pb.gz in the current
// directory, on both paths, and prints no log figures (a sampled run's
// events are samples).
func TestSampleDefaultProfile(t *testing.T) {
	bin := need(t, "bin/memtrace")
	for _, extra := range [][]string{nil, {"--preload"}} {
		dir := t.TempDir()
		cmd := command(bin, append(append([]string{"--sample", "64K"}, extra...), "--", "touch", filepath.Join(dir, "ran"))...)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := runCmd(t, cmd, time.Minute); err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, stderr.String())
		}
		got, _ := filepath.Glob(filepath.Join(dir, "memtrace.touch.*.pb.gz"))
		if len(got) != 1 {
			t.Fatalf("%v: profiles %v in the directory, want one memtrace.touch.PID.pb.gz\n%s", extra, got, stderr.String())
		}
		if extra == nil {
			f, err := os.Open(got[0])
			if err != nil {
				t.Fatal(err)
			}
			p, err := profile.Parse(f)
			f.Close()
			if err != nil {
				t.Fatalf("%s: %v", got[0], err)
			}
			bpftest.RequireProfileModeBPF(t, p)
		}
		if strings.Contains(stderr.String(), "memtrace stats:") {
			t.Errorf("%v: a sampled run printed log figures:\n%s", extra, stderr.String())
		}
	}
}

// TestSampleMaxProcSamples: --max-proc-samples bounds one process's live
// samples in the kernel side's table. At --sample 1 every block of
// sample_churn (61,000 live at its end) is a sample: with a bound of 1000
// the profile holds at most 1000 live blocks and at least most of them
// (the bound was reached and frees made room again), and the run says
// that samples did not fit.
func TestSampleMaxProcSamples(t *testing.T) {
	requireBPF(t)
	bin, prog := need(t, "bin/memtrace"), need(t, "tests/progs/build/sample_churn")
	out := filepath.Join(t.TempDir(), "bound.pb.gz")
	var stdout, stderr bytes.Buffer
	cmd := command(bin, "--sample", "1", "--max-proc-samples", "1000", "--stack-depth", "4", "-o", out, "--", prog, "7", "20000")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := runCmd(t, cmd, 2*time.Minute); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "did not fit") {
		t.Errorf("no word of the samples left out:\n%s", stderr.String())
	}
	_, objs := sampleEstimateObjects(t, out, "bpf")
	var live float64
	for _, s := range sampleSites {
		live += objs[s]
	}
	if live > 1000.5 || live < 900 {
		t.Errorf("%.0f live sampled blocks at the three sites, want at most 1000 (the bound) and most of it", live)
	}
}
