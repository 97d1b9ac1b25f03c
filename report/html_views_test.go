package report

import (
	"encoding/json"
	"html"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// htmlPageOf writes the HTML report of log data and returns it.
func htmlPageOf(t *testing.T, data []byte, args ...string) string {
	t.Helper()
	log := writeFile(t, "views.log", data)
	page := filepath.Join(t.TempDir(), "r.html")
	if _, errs, code := runMain(t, append(append(args, "--html", page), log)...); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func parseUints(t *testing.T, s string) []uint64 {
	t.Helper()
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		out = append(out, v)
	}
	return out
}

// TestHTMLCountChartsMatchLog: the allocations and temporary allocations
// charts are, at each of their times, the counts of a random log's
// allocations made by then, and of those that were temporary, counted
// here from the events written (heaptrack's rule: freed by the thread that
// allocated it before that thread allocated again).
func TestHTMLCountChartsMatchLog(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 33))
	l := &lb{}
	l.meta("header", "version", "test", "pid", "9", "comm", "app", "cmd", "./app")
	type live struct {
		ptr uint64
		tid int64
		at  int // index in allocs
	}
	var allocTS []uint64
	var temp []bool
	lastAlloc := map[int64]int{} // thread → its latest allocation's index
	var lives []live
	ts := uint64(0)
	for k := range 600 {
		ts += uint64(1 + rng.IntN(40))
		tid := int64(1 + rng.IntN(3))
		if len(lives) > 0 && rng.IntN(2) == 0 {
			j := rng.IntN(len(lives))
			// Mostly the thread's latest block: many temporaries.
			for k := len(lives) - 1; k >= 0 && rng.IntN(4) > 0; k-- {
				if lives[k].tid == tid {
					j = k
					break
				}
			}
			b := lives[j]
			lives = append(lives[:j], lives[j+1:]...)
			l.free(tid, "t"+strconv.FormatInt(tid, 10), ts, 16, b.ptr)
			// Temporary: freed by its own thread, which allocated nothing since.
			temp[b.at] = tid == b.tid && lastAlloc[b.tid] == b.at
			continue
		}
		ptr := uint64(0x10000 + 0x100*k)
		l.alloc(tid, "t"+strconv.FormatInt(tid, 10), "malloc", ts, 16, ptr, fr{"work", 0x10 + uint64(tid)}, fr{"main", 0x2})
		lastAlloc[tid] = len(allocTS)
		lives = append(lives, live{ptr, tid, len(allocTS)})
		allocTS = append(allocTS, ts)
		temp = append(temp, false)
	}
	l.ended(ts+1, 9)
	page := htmlPageOf(t, l.b)
	series := func(id string) (times, vs []uint64) {
		sec := page[strings.Index(page, `<section id="`+id+`">`):]
		sec = sec[:strings.Index(sec, "</section>")]
		m := regexp.MustCompile(`data-times="([^"]*)"`).FindStringSubmatch(sec)
		v := regexp.MustCompile(`<polyline class="count" data-v="([^"]*)"`).FindAllStringSubmatch(sec, -1)
		if m == nil || len(v) != 1 {
			t.Fatalf("%s: no chart data", id)
		}
		return parseUints(t, m[1]), parseUints(t, v[0][1])
	}
	var temps int
	for _, tmp := range temp {
		if tmp {
			temps++
		}
	}
	for _, c := range []struct {
		id   string
		only func(i int) bool
	}{{"allocations-over-time", func(int) bool { return true }}, {"temporary-over-time", func(i int) bool { return temp[i] }}} {
		times, vs := series(c.id)
		if len(times) != len(vs) || len(times) < 100 {
			t.Fatalf("%s: %d times, %d values", c.id, len(times), len(vs))
		}
		for k, at := range times {
			var want uint64
			for i, a := range allocTS {
				if a <= at && c.only(i) {
					want++
				}
			}
			if vs[k] != want {
				t.Fatalf("%s at %dµs: %d, the log has %d", c.id, at, vs[k], want)
			}
		}
		t.Logf("%s: %d at the end", c.id, vs[len(vs)-1])
	}
	if temps < 20 || temps > len(temp)-20 {
		t.Fatalf("%d temporaries of %d: the log tests little", temps, len(temp))
	}
}

// treeRow is a row of a call tree as the page has it.
type treeRow struct {
	name, fn string
	v        []int64
	self     bool
	kids     []*treeRow
}

// parseTree reads the rows of the tree div id from page: its <ul> and
// <li> lines nest as the rows do.
func parseTree(t *testing.T, page, id string) *treeRow {
	t.Helper()
	div := page[strings.Index(page, `<div class="tree" id="tree-`+id+`"`):]
	div = div[:strings.Index(div, "\n</div>")]
	liRe := regexp.MustCompile(`^<li (class="self" )?data-n="([^"]*)"( data-f="([^"]*)")? data-v="([^"]*)"`)
	root := &treeRow{name: "root"}
	stack := []*treeRow{}
	var last *treeRow
	for _, line := range strings.Split(div, "\n") {
		switch {
		case line == "<ul>":
			if last == nil {
				last = root
			}
			stack = append(stack, last)
		case line == "</ul>":
			stack = stack[:len(stack)-1]
		case strings.HasPrefix(line, "<li "):
			m := liRe.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("tree row %q", line)
			}
			r := &treeRow{name: m[2], fn: m[4], self: m[1] != ""}
			for _, s := range strings.Split(m[5], ",") {
				v, _ := strconv.ParseInt(s, 10, 64)
				r.v = append(r.v, v)
			}
			p := stack[len(stack)-1]
			p.kids = append(p.kids, r)
			last = r
		}
	}
	return root
}

// TestHTMLTreeSelfRows: where a row's callees do not add up to it, a
// "self" row holds the difference, column by column; where they do, there
// is none.
func TestHTMLTreeSelfRows(t *testing.T) {
	l := &lb{}
	l.meta("header", "version", "test", "pid", "9", "comm", "app", "cmd", "./app")
	ptr := uint64(0x1000)
	add := func(n int, size uint64, frames ...fr) {
		for range n {
			ptr += 0x100
			l.alloc(1, "main", "malloc", ptr/0x100, size, ptr, frames...)
		}
	}
	add(2, 100, fr{"f", 0x3}, fr{"main", 0x2})
	add(3, 40, fr{"g", 0x4}, fr{"f", 0x3}, fr{"main", 0x2})
	add(1, 7, fr{"h", 0x5}, fr{"f", 0x3}, fr{"main", 0x2})
	l.ended(ptr, 9)
	page := htmlPageOf(t, l.b)
	selves := 0
	var check func(r *treeRow, path string)
	check = func(r *treeRow, path string) {
		if len(r.kids) == 0 {
			return
		}
		var sum []int64
		var self *treeRow
		for _, k := range r.kids {
			if k.self {
				self = k
				continue
			}
			for i, v := range k.v {
				if i >= len(sum) {
					sum = append(sum, 0)
				}
				sum[i] += v
			}
			check(k, path+" > "+k.name)
		}
		if r.name == "root" {
			return
		}
		diff := false
		for i := range r.v {
			if r.v[i] != sum[i] {
				diff = true
			}
		}
		switch {
		case diff && self == nil:
			t.Errorf("%s: callees %v of %v, no self row", path, sum, r.v)
		case !diff && self != nil:
			t.Errorf("%s: callees add up, self row %v", path, self.v)
		case self != nil:
			selves++
			for i := range r.v {
				if self.v[i] != r.v[i]-sum[i] {
					t.Errorf("%s: self %v, want %v − %v", path, self.v, r.v, sum)
					break
				}
			}
		}
	}
	td := parseTree(t, page, "td")
	check(td, "top-down")
	check(parseTree(t, page, "bu"), "bottom-up")
	if selves != 1 {
		t.Fatalf("%d self rows, want f's", selves)
	}
	// f+0x3 allocated 2 × 100 B itself.
	f := td.kids[0].kids[0]
	if f.name != "f+0x3" || !f.kids[len(f.kids)-1].self || f.kids[len(f.kids)-1].v[0] != 2 || f.kids[len(f.kids)-1].v[1] != 200 {
		t.Fatalf("top-down: %s's rows %+v", f.name, f.kids)
	}
}

// ccLog: main calls f (which allocates itself and calls g and h) and k,
// which calls g too; g's blocks are temporary, h's and f's are not.
func ccLog() []byte {
	l := &lb{}
	l.meta("header", "version", "test", "pid", "9", "comm", "app", "cmd", "./app")
	ptr, ts := uint64(0x1000), uint64(0)
	add := func(n int, size uint64, temp bool, frames ...fr) {
		for range n {
			ptr += 0x100
			ts++
			l.alloc(1, "main", "malloc", ts, size, ptr, frames...)
			if temp {
				ts++
				l.free(1, "main", ts, size, ptr)
			}
		}
	}
	add(2, 100, false, fr{"f", 0x3}, fr{"main", 0x2})
	add(3, 40, true, fr{"g", 0x4}, fr{"f", 0x3}, fr{"main", 0x2})
	add(1, 7, false, fr{"h", 0x5}, fr{"f", 0x3}, fr{"main", 0x2})
	add(4, 10, true, fr{"g", 0x4}, fr{"k", 0x6}, fr{"main", 0x8})
	l.ended(ts+1, 9)
	return l.b
}

// htmlViewsTest drives the trees' column sort, the self row and the
// caller/callee view, and writes what it saw on <body>.
const htmlViewsTest = `<script>
(function () {
  var body = document.body, out = {};
  function fail(msg) { body.setAttribute("data-views", "FAIL: " + msg); throw new Error(msg); }
  var td = document.getElementById("tree-td");
  td.querySelector('.row.head .c[data-col="2"]').click();
  td.querySelectorAll("ul").forEach(function (ul) {
    var prev = Infinity, selfSeen = false;
    Array.prototype.forEach.call(ul.children, function (li) {
      if (li.classList.contains("self")) { selfSeen = true; return; }
      if (selfSeen) fail("a row after the self row");
      var v = Number(li.getAttribute("data-v").split(",")[2]);
      if (v > prev) fail("temporary not descending: " + v + " after " + prev);
      prev = v;
    });
  });
  out.order = Array.prototype.map.call(td.querySelector(":scope > ul").children, function (li) { return li.getAttribute("data-n"); });
  var self = td.querySelector("li.self");
  out.self = self ? self.querySelector(".row").textContent : "";
  out.selfShown = self ? self.offsetParent !== null : false;
  function rows(id) {
    var t = document.getElementById(id);
    return t ? Array.prototype.slice.call(t.querySelectorAll("tr")).slice(1).map(function (tr) {
      return Array.prototype.map.call(tr.children, function (c) { return c.textContent; }).join("|");
    }) : null;
  }
  var sel = document.getElementById("cc-fn");
  var opt = Array.prototype.filter.call(sel.options, function (o) { return o.textContent === "f"; })[0];
  if (!opt) fail("no f to pick");
  sel.value = opt.value;
  sel.dispatchEvent(new Event("change"));
  out.f = {cost: rows("cc-view") && Array.prototype.slice.call(document.querySelectorAll("#cc-view table")[0].querySelectorAll("tr")).slice(1).map(function (tr) { return tr.textContent; }), up: rows("cc-up"), down: rows("cc-down")};
  var gRow = td.querySelector('li[data-f="g"] .row');
  gRow.dispatchEvent(new MouseEvent("dblclick", {bubbles: true}));
  out.g = {fn: document.getElementById("cc-view").getAttribute("data-fn"), up: rows("cc-up"), down: rows("cc-down")};
  var pre = document.createElement("pre");
  pre.id = "views";
  pre.textContent = JSON.stringify(out);
  body.appendChild(pre);
  body.setAttribute("data-views", "ok");
})();
</script>
`

// TestHTMLCostsSelfAndCallersInChromium: in headless Chromium, a click on
// the trees' "temporary" title sorts every level by temporary allocations
// (the self row last); the self row shows; the caller/callee view of f
// lists main as its caller and g, h as its callees with their costs, and
// a double-click on g's tree row shows g, called from f and k.
func TestHTMLCostsSelfAndCallersInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts headless Chromium: make test runs it")
	}
	chromium := needTool(t, "chromium")
	page := htmlPageOf(t, ccLog())
	dir := t.TempDir()
	tested := filepath.Join(dir, "views.html")
	if err := os.WriteFile(tested, []byte(strings.Replace(page, "</body>", htmlViewsTest+"</body>", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	dom, logs := runTool(t, 2*time.Minute, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--dump-dom", "file://"+tested)
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, ":CONSOLE") {
			t.Errorf("console message: %s", line)
		}
	}
	if !strings.Contains(dom, `data-views="ok"`) {
		t.Fatalf("views: %s", regexp.MustCompile(`data-views="[^"]*"`).FindString(dom))
	}
	m := regexp.MustCompile(`<pre id="views">([^<]*)</pre>`).FindStringSubmatch(dom)
	var got struct {
		Order     []string
		Self      string
		SelfShown bool
		F         struct{ Cost, Up, Down []string }
		G         struct {
			Fn       string
			Up, Down []string
		}
	}
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &got); err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", got)
	// main+0x8 leads to 4 temporaries, main+0x2 to 3.
	if strings.Join(got.Order, " ") != "main+0x8 main+0x2" {
		t.Errorf("roots by temporary: %q", got.Order)
	}
	// f's self row: 2 calls, 200 B, no temporary, 200 B peak and leaked.
	if got.Self != "2200B0200B200Bself" || !got.SelfShown {
		t.Errorf("self row %q (shown %v)", got.Self, got.SelfShown)
	}
	// The peak (240 B) is during one of g's temporaries under f: f's 200
	// B and g's 40 B, before h allocated; what stays is f's 200 B and h's 7.
	if strings.Join(got.F.Cost, " ") != "6327B3240B207Binclusive 2200B0200B200Bself" {
		t.Errorf("f's cost %q", got.F.Cost)
	}
	if strings.Join(got.F.Up, " ") != "6|327B|3|240B|207B|main" || strings.Join(got.F.Down, " ") != "3|120B|3|40B|0B|g 1|7B|0|0B|7B|h" {
		t.Errorf("f's callers %q, callees %q", got.F.Up, got.F.Down)
	}
	if got.G.Fn != "g" || strings.Join(got.G.Up, " ") != "4|40B|4|0B|0B|k 3|120B|3|40B|0B|f" || strings.Join(got.G.Down, " ") != "none" {
		t.Errorf("g: %+v", got.G)
	}
}

// TestHTMLTreesStartAtMain: the trees' and flame graphs' stacks start at
// main, or at a thread's start routine: no start-up frame (_start,
// __libc_start_main, start_thread, clone3) is a row or a frame, and every
// top-down root is main or worker, the thread's routine.
func TestHTMLTreesStartAtMain(t *testing.T) {
	page := htmlPageOf(t, readableLog())
	td := parseTree(t, page, "td")
	roots := map[string]bool{}
	for _, r := range td.kids {
		roots[r.fn] = true
	}
	if len(roots) != 2 || !roots["main"] || !roots["worker"] {
		t.Fatalf("top-down roots in %v: want main and worker", roots)
	}
	for _, f := range []string{"_start", "__libc_start_main", "__libc_start_call_main", "start_thread", "clone3"} {
		if strings.Contains(page, `data-f="`+f+`"`) || strings.Contains(page, `data-n="`+f) {
			t.Errorf("start-up frame %s in a tree or flame graph", f)
		}
	}

	// Open from the top down to the first branch, however deep: main, a
	// and x (one callee each) open, b and d (x's two) closed.
	l := &lb{}
	l.meta("header", "version", "test", "pid", "9", "comm", "app", "cmd", "./app")
	l.alloc(1, "main", "malloc", 1, 10, 0x100, fr{"c", 1}, fr{"b", 2}, fr{"x", 7}, fr{"a", 3}, fr{"main", 4})
	l.alloc(1, "main", "malloc", 2, 10, 0x200, fr{"e", 5}, fr{"d", 6}, fr{"x", 7}, fr{"a", 3}, fr{"main", 4})
	l.ended(3, 9)
	page = htmlPageOf(t, l.b)
	open := map[string]string{}
	for _, m := range regexp.MustCompile(`<li data-n="([^"]*)" data-f="[^"]*" data-v="[^"]*" data-open="(true|false)"><details( open)?>`).FindAllStringSubmatch(page[strings.Index(page, `id="tree-td"`):strings.Index(page, `id="tree-bu"`)], -1) {
		if (m[2] == "true") != (m[3] == " open") {
			t.Errorf("row %s: data-open %s, details%s", m[1], m[2], m[3])
		}
		open[m[1]] = m[2]
	}
	if want := map[string]string{"main+0x4": "true", "a+0x3": "true", "x+0x7": "true", "b+0x2": "false", "d+0x6": "false"}; !maps.Equal(open, want) {
		t.Errorf("rows open %v, want %v", open, want)
	}
}
