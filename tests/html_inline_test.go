package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// htmlInlineSrc holds most of its bytes from a method inlined into main
// (issue 33's leaky.cpp: Cache::put), at two lines; htmlNoLineSrc, built
// without -g, allocates at two places of one function that only their
// offsets tell apart.
const htmlInlineSrc = `#include <cstdlib>
#include <cstring>

extern "C" void *noline_pair(int which);

struct Cache {
	char *slots[4096];
	int n = 0;
	__attribute__((always_inline)) inline void put(int i)
	{
		char *tmp = (char *)malloc(64 + (i & 7)); // SITE tmp
		memset(tmp, i, 64);
		__asm__ volatile("" ::"r"(tmp) : "memory");
		free(tmp);
		char *big = (char *)malloc(2432 + (i & 15)); // SITE big
		memset(big, i, 100);
		slots[n++ & 4095] = big;
	}
};

int main()
{
	static Cache c;
	for (int i = 0; i < 4096; i++)
		c.put(i);
	for (int i = 0; i < 50; i++) {
		noline_pair(0);
		noline_pair(1);
	}
	return 0;
}
`

const htmlNoLineSrc = `#include <stdlib.h>
void *volatile keep[128];
static int nk;
__attribute__((noinline)) void *noline_pair(int which)
{
	void *p;
	if (which)
		p = malloc(300);
	else
		p = malloc(500);
	keep[nk++ & 127] = p;
	return p;
}
`

// buildHTMLInline compiles the two sources: the C++ one -O2 -g, the C one
// -O0 without debug information.
func buildHTMLInline(t *testing.T) (bin, src string) {
	t.Helper()
	dir := t.TempDir()
	src = filepath.Join(dir, "leaky.cpp")
	csrc := filepath.Join(dir, "noline.c")
	if err := os.WriteFile(src, []byte(htmlInlineSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(csrc, []byte(htmlNoLineSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	obj := filepath.Join(dir, "noline.o")
	if out, err := command("gcc", "-O0", "-fno-omit-frame-pointer", "-fno-builtin", "-c", "-o", obj, csrc).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	bin = filepath.Join(dir, "leaky")
	if out, err := command("g++", "-O2", "-g", "-fno-omit-frame-pointer", "-fno-builtin", "-o", bin, src, obj).CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
	os.Chmod(dir, 0o755)
	return bin, src
}

func htmlSrcLine(t *testing.T, src, mark string) int {
	t.Helper()
	for i, l := range strings.Split(src, "\n") {
		if strings.Contains(l, mark) {
			return i + 1
		}
	}
	t.Fatalf("no %q in the source", mark)
	return 0
}

// TestHTMLInlinedFramesAndCallSites traces the C++ program and checks its
// HTML report: the inlined Cache::put, at the lines of its two calls, is
// in the rankings, the trees (whose roots are main), the flame graphs,
// the call-site legend and the caller/callee view; the two allocations of
// the function without line tables are two rows, told apart by offset; in
// headless Chromium, the tree search for "Cache" finds its rows.
func TestHTMLInlinedFramesAndCallSites(t *testing.T) {
	requireBPF(t)
	bin, _ := buildHTMLInline(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "leaky.log")
	if code, _, se := memtraceRun(t, nil, "--stack-depth", "16", "-o", log, "--", bin); code != 0 {
		t.Fatalf("memtrace exit %d: %s", code, se)
	}
	bpfLog(t, log)
	page := filepath.Join(dir, "report.html")
	if code, _, se := memtraceRun(t, nil, "report", "--html", page, log); code != 0 {
		t.Fatalf("report exit %d: %s", code, se)
	}
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	big := "Cache::put(int) leaky.cpp:" + strconv.Itoa(htmlSrcLine(t, htmlInlineSrc, "SITE big"))
	tmp := "Cache::put(int) leaky.cpp:" + strconv.Itoa(htmlSrcLine(t, htmlInlineSrc, "SITE tmp"))
	section := func(id string) string {
		i := strings.Index(text, `<section id="`+id+`">`)
		if i < 0 {
			t.Fatalf("no section %s", id)
		}
		s := text[i:]
		return s[:strings.Index(s, "</section>")]
	}
	rankings, trees, flames, legend := section("rankings"), section("trees"), section("flamegraph"), section("sites-over-time")
	for _, name := range []string{big, tmp} {
		if !strings.Contains(rankings, "<summary><code>"+name+"</code>") {
			t.Errorf("rankings lack a row named %q", name)
		}
		if !strings.Contains(trees, `<li data-n="`+name+`" data-f="Cache::put(int)"`) {
			t.Errorf("trees lack the row %q", name)
		}
		if !strings.Contains(flames, `data-n="`+name+`"`) {
			t.Errorf("flame graphs lack the frame %q", name)
		}
	}
	if !strings.Contains(legend, ">"+big+"</code>") {
		t.Errorf("the call-site legend lacks %q", big)
	}
	if !strings.Contains(section("callers"), `"n":"Cache::put(int)"`) {
		t.Errorf("the caller/callee view lacks Cache::put(int)")
	}
	// The trees start at main: the program's roots are main's call sites,
	// no start-up frame anywhere.
	td := trees[strings.Index(trees, `id="tree-td"`):strings.Index(trees, `id="tree-bu"`)]
	roots := regexp.MustCompile(`(?m)^<li data-n="([^"]*)" data-f="([^"]*)"[^\n]*padding-left:4px`).FindAllStringSubmatch(td, -1)
	var mains []string
	for _, m := range roots {
		if m[2] == "main" {
			mains = append(mains, m[1])
		}
	}
	if len(mains) < 2 {
		t.Errorf("top-down roots %q: want main's call sites", roots)
	}
	for _, f := range []string{"_start", "__libc_start_main", "__libc_start_call_main"} {
		if strings.Contains(trees, `data-f="`+f+`"`) || strings.Contains(flames, `data-n="`+f) {
			t.Errorf("start-up frame %s in the trees or flame graphs", f)
		}
	}
	// The function without lines: two rows, by offset.
	offs := map[string]bool{}
	for _, m := range regexp.MustCompile(`<summary><code>(noline_pair\+0x[0-9a-f]+)`).FindAllStringSubmatch(rankings, -1) {
		offs[m[1]] = true
	}
	if len(offs) != 2 {
		t.Errorf("rankings name noline_pair's allocations %v: want two offsets", offs)
	}
	var fl []string
	for _, m := range regexp.MustCompile(`data-n="(noline_pair\+0x[0-9a-f]+)"`).FindAllStringSubmatch(flames, -1) {
		if !slices.Contains(fl, m[1]) {
			fl = append(fl, m[1])
		}
	}
	if len(fl) != 2 {
		t.Errorf("flame graph frames of noline_pair %v: want two offsets", fl)
	}

	// The search, in the browser: a Chromium start-up is most of this
	// test's time, and make check leaves browsers to make test as the
	// report package's tests do.
	if testing.Short() {
		t.Log("-short: the search in Chromium is not run; make test runs it")
		return
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Log("no chromium: the search is not run")
		return
	}
	run := `<script>(function(){var i=document.getElementById("tree-search");i.value="Cache";i.dispatchEvent(new Event("input"));
var hits=[];document.querySelectorAll("#tree-td li.hit").forEach(function(li){if(li.offsetParent!==null)hits.push(li.getAttribute("data-n"));});
document.body.setAttribute("data-hits",hits.join("|"));document.body.setAttribute("data-count",document.getElementById("tree-count").textContent);})();</script>`
	searched := filepath.Join(dir, "searched.html")
	if err := os.WriteFile(searched, []byte(strings.Replace(text, "</body>", run+"</body>", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir="+filepath.Join(dir, "profile"), "--dump-dom", "file://"+searched)
	out, err := runWaitOutput(cmd, 2*time.Minute)
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	hits := regexp.MustCompile(`data-hits="([^"]*)"`).FindStringSubmatch(string(out))
	if hits == nil {
		t.Fatalf("no search result in the DOM")
	}
	got := strings.Split(hits[1], "|")
	if !slices.Contains(got, big) || !slices.Contains(got, tmp) {
		t.Errorf("search \"Cache\" shows %q: want %q and %q", got, big, tmp)
	}
	t.Logf("search \"Cache\": %q; noline_pair: %v", got, fl)
}
