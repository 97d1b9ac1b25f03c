package report

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestNiceStepAndRoundTicks(t *testing.T) {
	for _, c := range []struct {
		span float64
		n    int
		want float64
	}{{966880, 5, 200000}, {1, 5, 0.2}, {7, 5, 2}, {100, 5, 20}, {101, 5, 50}, {4.2e9, 4, 2e9}, {25, 5, 5}, {0, 5, 1}} {
		if got := niceStep(c.span, c.n); got != c.want {
			t.Errorf("niceStep(%v, %d) = %v, want %v", c.span, c.n, got, c.want)
		}
	}
	for v, want := range map[uint64]string{0: "0B", 500: "500B", 1000: "1K", 200000: "200K", 1_200_000: "1.2M", 25_000_000: "25M", 1_500_000_000: "1.5G"} {
		if got := roundBytes(v); got != want {
			t.Errorf("roundBytes(%d) = %q, want %q", v, got, want)
		}
	}
	// The report's old axis: 966.88K split in quarters.
	ticks, top := byteTicks(966880, 5)
	var labels []string
	for _, v := range ticks {
		labels = append(labels, roundBytes(v))
	}
	if got := strings.Join(labels, " "); got != "0B 200K 400K 600K 800K 1M" || top != 1_000_000 {
		t.Fatalf("ticks of 966.88K: %s (top %d)", got, top)
	}
	var tl []string
	for _, tk := range timeTicks(2_473_590, 6) {
		tl = append(tl, tk.label)
	}
	if got := strings.Join(tl, " "); got != "0.0s 0.5s 1.0s 1.5s 2.0s" {
		t.Fatalf("time ticks of 2.47 s: %s", got)
	}
	tl = tl[:0]
	for _, tk := range timeTicks(850, 6) {
		tl = append(tl, tk.label)
	}
	if got := strings.Join(tl, " "); got != "0µs 200µs 400µs 600µs 800µs" {
		t.Fatalf("time ticks of 850 µs: %s", got)
	}
}

// sitesLog: grow (1000 B, live 10–30 µs), put (2000 B from 20 µs, never
// freed), tmp (16 blocks of 10 B and 700 B, freed at once): their live
// maxima and their sizes are known.
func htmlSitesLog() []byte {
	l := &lb{}
	l.meta("header", "version", "test", "pid", "9", "comm", "app", "cmd", "./app")
	l.alloc(1, "main", "malloc", 10, 1000, 0x1000, fr{"_Z4growm", 1}, fr{"main", 2})
	l.alloc(1, "main", "malloc", 20, 2000, 0x9000, fr{"_ZN5cache3putEv", 3}, fr{"main", 4})
	l.free(1, "main", 30, 1000, 0x1000)
	for k := range 16 {
		ts := uint64(40 + 2*k)
		l.alloc(1, "main", "malloc", ts, 10, 0x20000, fr{"_Z3tmpv", 5}, fr{"main", 6})
		l.free(1, "main", ts+1, 10, 0x20000)
	}
	l.alloc(1, "main", "malloc", 80, 700, 0x30000, fr{"_Z3tmpv", 5}, fr{"main", 6})
	l.free(1, "main", 90, 700, 0x30000)
	return l.b
}

func TestHTMLSiteSeriesHistogramAndTicks(t *testing.T) {
	log := writeFile(t, "sites.log", htmlSitesLog())
	page := filepath.Join(t.TempDir(), "r.html")
	if _, errs, code := runMain(t, log, "--html", page); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	// One line per site, its maximum the site's most bytes live at once;
	// ordered by bytes live at the peak (put and grow: 3000 B at 20 µs).
	maxes := map[string]string{}
	for _, m := range regexp.MustCompile(`<polyline class="site" data-site="(\d)" data-max="(\d+)"[^>]*><title>([^<]*)</title>`).FindAllStringSubmatch(text, -1) {
		maxes[m[3]] = m[1] + ":" + m[2]
	}
	want := map[string]string{"cache::put()+0x3": "0:2000", "grow(unsigned long)+0x1": "1:1000", "tmp()+0x5": "2:700"}
	if len(maxes) != 3 {
		t.Fatalf("site lines %v, want %v", maxes, want)
	}
	for k, v := range want {
		if maxes[k] != v {
			t.Fatalf("site %s: %q, want %q (all %v)", k, maxes[k], v, maxes)
		}
	}
	// The histogram: 16 blocks ≤10B, 700 B ≤1K, 1000 B ≤1K, 2000 B ≤2K.
	var bars []string
	for _, m := range regexp.MustCompile(`<g class="bar" data-max="(\d+)" data-count="(\d+)" data-bytes="(\d+)">`).FindAllStringSubmatch(text, -1) {
		bars = append(bars, m[1]+":"+m[2]+":"+m[3])
	}
	if got := strings.Join(bars, " "); got != "10:16:160 20:0:0 50:0:0 100:0:0 200:0:0 500:0:0 1000:2:1700 2000:1:2000" {
		t.Fatalf("histogram bars %s", got)
	}
	// Every y tick is round: 1, 2 or 5 × 10^k in the byte unit.
	ticks := regexp.MustCompile(`class="ax ytick"[^>]*>([^<]*)<`).FindAllStringSubmatch(text, -1)
	if len(ticks) < 6 {
		t.Fatalf("%d y ticks", len(ticks))
	}
	for _, m := range ticks {
		if !regexp.MustCompile(`^(0B|0|[125]0*(B|K|M|G)?|[0-9.]+[KMG]?)$`).MatchString(m[1]) {
			t.Fatalf("tick %q", m[1])
		}
		if strings.Contains(m[1], ".") && len(m[1]) > 4 {
			t.Fatalf("tick %q has more digits than its step", m[1])
		}
	}
	mustContain(t, text, `>3K</text>`, `>1.5K</text>`, `>0B</text>`) // 3000 B peak: 0B 1K 2K 3K; put alone 2000 B: 0B 500B … 2K
	// Trees: top-down starts at main, bottom-up at the allocating calls.
	td := text[strings.Index(text, `id="tree-td"`):strings.Index(text, `id="tree-bu"`)]
	bu := text[strings.Index(text, `id="tree-bu"`):]
	// Each row is a function at a call site: main's three calls are three
	// roots, each open, 19 calls and 3.86K in all.
	roots := regexp.MustCompile(`(?m)^<li data-n="([^"]*)" data-f="([^"]*)" data-v="(\d+),(\d+),[^"]*" data-open="true"><details open><summary class="row"><span class="c">\d+</span><span class="c">[^<]*</span>[^\n]*padding-left:4px`).FindAllStringSubmatch(td, -1)
	calls, bytes := 0, 0
	var rootNames []string
	for _, m := range roots {
		if m[2] != "main" {
			t.Errorf("top-down root %s is in %s, not main", m[1], m[2])
		}
		rootNames = append(rootNames, m[1])
		c, _ := strconv.Atoi(m[3])
		b, _ := strconv.Atoi(m[4])
		calls += c
		bytes += b
	}
	if strings.Join(rootNames, " ") != "main+0x6 main+0x2 main+0x4" || calls != 19 || bytes != 3860 {
		t.Fatalf("top-down roots %q: %d calls, %d bytes; want main's three call sites, 19 calls, 3860 bytes:\n%s", rootNames, calls, bytes, td[:min(len(td), 1500)])
	}
	for _, f := range []string{"cache::put()+0x3", "grow(unsigned long)+0x1", "tmp()+0x5"} {
		if !strings.Contains(bu, `<li data-n="`+f+`" data-f="`+strings.Split(f, "+")[0]+`"`) {
			t.Fatalf("bottom-up tree lacks the root %s", f)
		}
	}
	if n := strings.Count(td, "<li "); n != 6 {
		t.Fatalf("top-down tree has %d rows, want main's 3 call sites and their 3 callees", n)
	}
	if strconv.Itoa(strings.Count(bu, "<li ")) != "6" {
		t.Fatalf("bottom-up tree rows: %d", strings.Count(bu, "<li "))
	}
}

func TestFitLabelEllipsis(t *testing.T) {
	name := "app::Worker::process(app::Request const&)"
	if got := fit(name, 1000); got != name {
		t.Fatalf("wide: %q", got)
	}
	got := fit(name, 6+10*flameCharPx)
	if got != "app::Work…" || len([]rune(got)) != 10 {
		t.Fatalf("10 characters: %q", got)
	}
	if got := fit(name, 10); got != "" {
		t.Fatalf("narrow: %q", got)
	}
}
