package report

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/internal/heapprof/heapproftest"
	"github.com/memtrace/memtrace/logfmt"
)

// needTool finds a program the exports are checked with. `make deps`
// installs them (valgrind's ms_print, chromium); in CI a missing one fails.
func needTool(t *testing.T, name string) string {
	t.Helper()
	if name == "go" {
		if p, err := exec.LookPath("go"); err == nil {
			return p
		}
		// Where the README puts Go when it is not on PATH.
		if p := "/usr/local/go/bin/go"; fileExists(p) {
			return p
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed (make deps installs it)", name)
		}
		bpftest.Unavailable(t, "%s is not installed (make deps installs it)", name)
	}
	return p
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func runTool(t *testing.T, timeout time.Duration, name string, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s\n%s", name, args, err, out.String(), errb.String())
	}
	return out.String(), errb.String()
}

func TestMassifReadByMsPrint(t *testing.T) {
	msPrint := needTool(t, "ms_print")
	log := writeFile(t, "known.log", knownLog())
	mf := filepath.Join(t.TempDir(), "known.massif")
	if _, errs, code := runMain(t, log, "-M", mf); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	raw, _ := os.ReadFile(mf)
	// The peak snapshot is exact: 7000 bytes, B twice and C.
	if !regexp.MustCompile(`time=0\.018\nmem_heap_B=7000\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=peak\nn2: 7000 \(heap allocation functions\)`).Match(raw) {
		t.Fatalf("no exact peak snapshot:\n%s", raw)
	}
	out, _ := runTool(t, time.Minute, msPrint, mf)
	mustContain(t, out,
		"Command:            ./app --known",
		"(peak)",
		"100.00% (7,000B) (heap allocation functions) malloc/new/new[], --alloc-fns, etc.",
		"->71.43% (5,000B) 0x0: grow(unsigned long) (in /nonexistent/app)",
		"| ->71.43% (5,000B) 0x0: worker_run (in /nonexistent/app)",
		"->28.57% (2,000B) 0x0: cache::put() (in /nonexistent/app)",
	)
	// A bigger log, many stacks: ms_print reads every snapshot.
	rich := writeFile(t, "rich.log", richLog(20000, 7))
	if _, errs, code := runMain(t, rich, "--massif", mf, "--massif-threshold", "5"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	out, _ = runTool(t, time.Minute, msPrint, mf)
	mustContain(t, out, "Number of snapshots: 101", "all below ms_print's threshold")
}

func TestPprofReadByGoToolPprof(t *testing.T) {
	goTool := needTool(t, "go")
	log := writeFile(t, "known.log", knownLog())
	pf := filepath.Join(t.TempDir(), "known.pb.gz")
	if _, errs, code := runMain(t, log, "--pprof", pf); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	f, err := os.Open(pf)
	if err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, st := range p.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	if got := strings.Join(types, " "); got != "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes peak_objects/count peak_space/bytes" {
		t.Fatalf("sample types %s", got)
	}
	var sum [4]int64
	for _, s := range p.Sample {
		for k, v := range s.Value[:4] {
			sum[k] += v
		}
	}
	if sum != [4]int64{7, 7310, 3, 2010} {
		t.Fatalf("sample sums %v", sum)
	}
	out, _ := runTool(t, 2*time.Minute, goTool, "tool", "pprof", "-top", "-nodefraction=0", "-sample_index=alloc_space", pf)
	mustContain(t, out, "Type: alloc_space", "grow(unsigned long)", "cache::put()", "make_tmp", "[no stack] malloc")
	if !regexp.MustCompile(`(?m)^\s*5000B\s+68\.40%\s+68\.40%\s+5000B\s+68\.40%\s+grow\(unsigned long\)$`).MatchString(out) {
		t.Fatalf("grow's 5000 bytes not on top:\n%s", out)
	}
	out, _ = runTool(t, 2*time.Minute, goTool, "tool", "pprof", "-top", "-nodefraction=0", "-sample_index=inuse_objects", pf)
	if !regexp.MustCompile(`(?m)^\s*2\s+66\.67%.*cache::put\(\)$`).MatchString(out) {
		t.Fatalf("inuse_objects:\n%s", out)
	}
}

// richLog is a log with many call stacks, as memtrace-genlog writes: n
// events over 4 threads, some blocks never freed.
func richLog(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 3))
	syms := []string{"_ZN3app6Worker7processERKNS_7RequestE", "_ZN3app5Cache6insertEmRKSs", "_ZN3app6Parser5parseEPKcm",
		"_ZN3app4Pool4growEm", "main", "_ZN3app3Net4recvEv", "_ZN3app6Worker3runEv", "start_thread", "_ZN3app3Log5writeERKSs"}
	stacks := make([][]fr, 60)
	for i := range stacks {
		for range 2 + r.IntN(4) {
			stacks[i] = append(stacks[i], fr{syms[r.IntN(len(syms))], uint64(r.IntN(64))})
		}
	}
	l := &lb{}
	l.meta(logfmt.WordHeader, "version", "test", "pid", "7", "comm", "rich", "cmd", "./rich")
	type blk struct{ ptr, size uint64 }
	live := map[int64][]blk{}
	next := uint64(0x10000)
	for ts := uint64(1); ts <= uint64(n); ts++ {
		tid := int64(1 + r.IntN(4))
		name := fmt.Sprintf("t%d", tid)
		if b := live[tid]; len(b) > 0 && r.IntN(2) == 0 {
			k := r.IntN(len(b))
			l.free(tid, name, ts*10, b[k].size, b[k].ptr)
			live[tid] = append(b[:k], b[k+1:]...)
			continue
		}
		size := uint64(16 << r.IntN(8))
		l.alloc(tid, name, "malloc", ts*10, size, next, stacks[r.IntN(len(stacks))]...)
		if r.IntN(50) > 0 {
			live[tid] = append(live[tid], blk{next, size})
		}
		next += size
	}
	l.ended(uint64(n)*10+1, 7)
	return l.b
}

const selfTest = `<script>
(function () {
  function fail(msg) { document.body.setAttribute("data-selftest", "FAIL: " + msg); throw new Error(msg); }
  var peakBtn = document.querySelector('.tabs button[data-cost="peak"]');
  if (!peakBtn) fail("no peak button");
  peakBtn.click();
  var div = document.getElementById("flame-peak");
  if (div.style.display === "none") fail("peak flame graph hidden after its button");
  if (document.getElementById("flame-allocations").style.display !== "none") fail("allocations flame graph still shown");
  var frames = div.querySelectorAll("g.f");
  var target = null;
  for (var i = 0; i < frames.length; i++) {
    if (frames[i].getAttribute("data-d") === "2" && Number(frames[i].getAttribute("data-w")) < 0.5) { target = frames[i]; break; }
  }
  if (!target) fail("no narrow frame at depth 2");
  target.dispatchEvent(new MouseEvent("click", {bubbles: true}));
  var w = Number(target.querySelector("rect").getAttribute("width"));
  if (Math.abs(w - 1200) > 1) fail("zoomed frame is " + w + " wide");
  var hidden = 0;
  for (var j = 0; j < frames.length; j++) if (frames[j].style.display === "none") hidden++;
  if (hidden === 0) fail("zoom hid nothing");
  div.querySelector('g.f[data-d="0"]').dispatchEvent(new MouseEvent("click", {bubbles: true}));
  for (var k = 0; k < frames.length; k++) if (frames[k].style.display === "none") fail("zoom out left frames hidden");
  document.body.setAttribute("data-selftest", "ok");
})();
</script>
`

// TestHTMLInChromium opens the HTML report in headless Chromium: it must
// load with no console message, its script must switch flame graphs and
// zoom, and a screenshot must show the chart and the flame graph.
func TestHTMLInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts headless Chromium: make test runs it")
	}
	chromium := needTool(t, "chromium")
	dir := t.TempDir()
	log := writeFile(t, "rich.log", richLog(20000, 5))
	page := filepath.Join(dir, "report.html")
	if _, errs, code := runMain(t, log, "--html", page, "--cost", "peak"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	for _, bad := range []string{"http://", "https://", "<link", "src=", "url(", "@import"} {
		if strings.Contains(text, bad) {
			t.Errorf("the page refers outside itself: %q", bad)
		}
	}
	mustContain(t, text, "<h2>Summary</h2>", "peak heap memory consumption", `<svg class="chart"`, `id="flame-peak"`, "Memory leaks", "app::Worker::process(app::Request const&amp;)")

	// The script: no console message, and it does what it says.
	tested := filepath.Join(dir, "selftest.html")
	if err := os.WriteFile(tested, []byte(strings.Replace(text, "</body>", selfTest+"</body>", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	chrome := func(extra ...string) (string, string) {
		args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
			"--user-data-dir=" + filepath.Join(dir, "profile")}, extra...)
		return runTool(t, 2*time.Minute, chromium, args...)
	}
	dom, logs := chrome("--dump-dom", "file://"+tested)
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, ":CONSOLE") {
			t.Errorf("console message: %s", line)
		}
	}
	mustContain(t, dom, `data-ready="1"`)
	if !strings.Contains(dom, `data-selftest="ok"`) {
		m := regexp.MustCompile(`data-selftest="[^"]*"`).FindString(dom)
		t.Fatalf("script self-test: %s", m)
	}

	// The screenshot: the page drew its chart line and warm flame frames
	// (below the charts of live bytes, allocations and temporaries).
	shot := filepath.Join(dir, "shot.png")
	chrome("--window-size=1280,2400", "--screenshot="+shot, "file://"+page)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var ink, line, flame int
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			if r < 240 || g < 240 || bl < 240 {
				ink++
			}
			if r > 190 && r < 240 && g > 50 && g < 100 && bl < 50 {
				line++ // the chart's #d9480f and its neighbours
			}
			if r > 200 && g > 60 && g < 210 && bl < 110 {
				flame++ // flame graph oranges and yellows
			}
		}
	}
	total := b.Dx() * b.Dy()
	t.Logf("screenshot %dx%d: %d%% ink, %d line pixels, %d flame pixels", b.Dx(), b.Dy(), ink*100/total, line, flame)
	if ink*100/total < 5 || line < 200 || flame < 5000 {
		t.Fatalf("the screenshot lacks content (%s kept)", shot)
	}
	if os.Getenv("MEMTRACE_KEEP_SCREENSHOT") != "" {
		os.Rename(shot, os.Getenv("MEMTRACE_KEEP_SCREENSHOT"))
	}
}

// TestPprofReadAsScrapersRead holds --pprof to the rules Parca and
// Pyroscope read a profile by (heapproftest.Check): a snapshot at the
// log's end (no duration; the runtime is a comment), Go's sample types
// and the peak's, string labels with the pid when there are several
// processes.
func TestPprofReadAsScrapersRead(t *testing.T) {
	one := writeFile(t, "known.log", knownLog())
	two := writeFile(t, "again.log", knownLog())
	for _, c := range []struct {
		logs []string
		want heapproftest.Want
	}{{[]string{one}, heapproftest.Want{Peak: true}}, {[]string{one, two}, heapproftest.Want{Peak: true, PID: true}}} {
		pf := filepath.Join(t.TempDir(), "p.pb.gz")
		if _, errs, code := runMain(t, append(c.logs, "--pprof", pf)...); code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		b, err := os.ReadFile(pf)
		if err != nil {
			t.Fatal(err)
		}
		p, err := profile.ParseData(b)
		if err != nil {
			t.Fatal(err)
		}
		if bad := heapproftest.Check(p, c.want); len(bad) > 0 {
			t.Errorf("%d log(s):\n%s", len(c.logs), strings.Join(bad, "\n"))
		}
		if !slices.Contains(p.Comments, "runtime 21µs") {
			t.Errorf("%d log(s): comments %q, want the runtime", len(c.logs), p.Comments)
		}
	}
}
