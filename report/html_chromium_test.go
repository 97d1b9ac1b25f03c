package report

import (
	"bytes"
	"encoding/json"
	"html"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/analysis"
)

// htmlSelfTest drives the new parts of the page after its own script ran:
// flame labels fit their boxes (before and after a zoom), the tree search
// keeps exactly the matching rows with their callers and callees, the tree
// tabs switch. It writes what it saw on <body> for the test to read.
const htmlSelfTest = `<script>
(function () {
  var body = document.body;
  function fail(msg) { body.setAttribute("data-selftest", "FAIL: " + msg); throw new Error(msg); }
  function checkLabels(svg, what, both) {
    var full = 0, cut = 0;
    svg.querySelectorAll("g.f").forEach(function (g) {
      if (g.style.display === "none") return;
      var text = g.querySelector("text"), rect = g.querySelector("rect"), name = g.getAttribute("data-n");
      var s = text.textContent;
      if (s === "") return;
      var room = Number(rect.getAttribute("width")) + 0.5 - 3;
      if (text.getComputedTextLength() > room + 0.01) fail(what + ": label '" + s + "' is " + text.getComputedTextLength() + " wide in " + room);
      if (s === name) { full++; return; }
      if (s.slice(-1) !== "\u2026" || name.indexOf(s.slice(0, -1)) !== 0) fail(what + ": label '" + s + "' is not a prefix of '" + name + "' with an ellipsis");
      if (g.querySelector("title").textContent.indexOf(name) !== 0) fail(what + ": the tooltip lacks the full name " + name);
      cut++;
    });
    if (full === 0 || (both && cut === 0)) fail(what + ": " + full + " whole and " + cut + " cut labels: nothing tested");
    return full + cut;
  }
  var svg = document.querySelector("#flame-allocations svg.fg");
  var n0 = checkLabels(svg, "first view", true);
  var target = null;
  svg.querySelectorAll("g.f").forEach(function (g) {
    if (!target && g.getAttribute("data-d") === "1" && Number(g.getAttribute("data-w")) < 0.3) target = g;
  });
  if (!target) fail("no narrow frame at depth 1");
  target.dispatchEvent(new MouseEvent("click", {bubbles: true}));
  // Frames are call sites: a zoom into one often has room for every
  // label, so the labels are checked to fit, cut or not.
  checkLabels(svg, "zoomed", false);
  svg.querySelector('g.f[data-d="0"]').dispatchEvent(new MouseEvent("click", {bubbles: true}));
  body.setAttribute("data-labels", String(n0));

  // Tree search.
  var td = document.getElementById("tree-td");
  var rows = Array.prototype.slice.call(td.querySelectorAll("li"));
  var q = "parser";
  var want = rows.filter(function (li) { return li.getAttribute("data-n").toLowerCase().indexOf(q) >= 0; });
  var input = document.getElementById("tree-search");
  input.value = "Parser";
  input.dispatchEvent(new Event("input"));
  function visible(li) { for (var e = li; e && e !== td; e = e.parentElement) if (e.style && e.style.display === "none") return false; return true; }
  function matches(li) { return li.getAttribute("data-n").toLowerCase().indexOf(q) >= 0; }
  var shown = rows.filter(visible);
  shown.forEach(function (li) {
    var up = false, down = li.querySelectorAll("li").length > 0 && Array.prototype.some.call(li.querySelectorAll("li"), matches);
    for (var e = li.parentElement; e && e !== td; e = e.parentElement) if (e.tagName === "LI" && matches(e)) up = true;
    if (!matches(li) && !up && !down) fail("row " + li.getAttribute("data-n") + " shown: no match in it, above or below");
  });
  want.forEach(function (li) {
    if (!visible(li)) fail("matching row " + li.getAttribute("data-n") + " hidden");
    if (!li.classList.contains("hit")) fail("matching row " + li.getAttribute("data-n") + " not highlighted");
  });
  var hits = td.querySelectorAll("li.hit").length;
  if (hits !== want.length) fail(hits + " rows highlighted, " + want.length + " match");
  if (document.getElementById("tree-count").textContent !== want.length + " matching rows") fail("count says " + document.getElementById("tree-count").textContent);
  if (!(shown.length < rows.length) || want.length === 0) fail("the search kept " + shown.length + " of " + rows.length + " rows, " + want.length + " matching: nothing filtered");
  body.setAttribute("data-tree-rows", rows.length + " " + shown.length + " " + want.length);
  input.value = "";
  input.dispatchEvent(new Event("input"));
  if (rows.filter(visible).length !== rows.length) fail("clearing the search left rows hidden");
  if (td.querySelectorAll("li.hit").length !== 0) fail("clearing the search left rows highlighted");
  document.querySelector('#trees button[data-tree="bu"]').click();
  if (td.style.display !== "none" || document.getElementById("tree-bu").style.display === "none") fail("bottom-up tab did not switch");
  body.setAttribute("data-selftest", "ok");
})();
</script>
`

// TestHTMLChartsTreesInChromium checks the histogram, the call-site chart,
// the axes, the flame labels and the call trees in headless Chromium,
// against the model: the DOM after the scripts ran, and screenshots.
func TestHTMLChartsTreesInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts headless Chromium: make test runs it")
	}
	chromium := needTool(t, "chromium")
	dir := t.TempDir()
	data := richLog(20000, 5)
	log := writeFile(t, "rich.log", data)
	page := filepath.Join(dir, "report.html")
	if _, errs, code := runMain(t, log, "--html", page); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	chrome := func(extra ...string) (string, string) {
		args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
			"--user-data-dir=" + filepath.Join(dir, "profile")}, extra...)
		return runTool(t, 2*time.Minute, chromium, args...)
	}
	tested := filepath.Join(dir, "selftest.html")
	if err := os.WriteFile(tested, []byte(strings.Replace(text, "</body>", htmlSelfTest+"</body>", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	dom, logs := chrome("--dump-dom", "file://"+tested)
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, ":CONSOLE") {
			t.Errorf("console message: %s", line)
		}
	}
	if !strings.Contains(dom, `data-selftest="ok"`) {
		t.Fatalf("self-test: %s", regexp.MustCompile(`data-selftest="[^"]*"`).FindString(dom))
	}
	t.Logf("labels checked %s; tree rows (all, shown, matching): %s",
		regexp.MustCompile(`data-labels="[^"]*"`).FindString(dom), regexp.MustCompile(`data-tree-rows="[^"]*"`).FindString(dom))

	// The histogram's bars are the model's buckets, count for count.
	m := analysis.New()
	if err := m.ReadAll(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, b := range m.SizeHistogram(-1) {
		if b.Count > 0 {
			want[strconv.FormatUint(b.Max, 10)] = strconv.FormatInt(b.Count, 10)
		}
	}
	got := map[string]string{}
	for _, g := range regexp.MustCompile(`<g class="bar" data-max="(\d+)" data-count="(\d+)"`).FindAllStringSubmatch(dom, -1) {
		if g[2] != "0" {
			got[g[1]] = g[2]
		}
	}
	if len(want) < 5 || len(got) != len(want) {
		t.Fatalf("histogram bars %v, model %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("bucket ≤%s: page %s, model %s", k, got[k], v)
		}
	}
	// The call-site chart draws the 8 sites, each with its legend row.
	if n := strings.Count(dom, `<polyline class="site"`); n != siteSeries {
		t.Fatalf("%d call-site lines", n)
	}
	if n := strings.Count(dom, `<li data-site=`); n != siteSeries {
		t.Fatalf("%d legend rows", n)
	}
	// Round ticks only.
	for _, tk := range regexp.MustCompile(`class="ax ytick"[^>]*>([^<]*)<`).FindAllStringSubmatch(dom, -1) {
		if !regexp.MustCompile(`^(\d+(\.\d)?[BKMG]?)$`).MatchString(tk[1]) {
			t.Fatalf("y tick %q", tk[1])
		}
	}

	// Screenshots: the whole page, and the page with a search run.
	shot := func(name, file string) (blue, yellow, lines int) {
		p := filepath.Join(dir, name)
		chrome("--window-size=1280,4200", "--screenshot="+p, "file://"+file)
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b := img.Bounds()
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				r, g, bl, _ := img.At(x, y).RGBA()
				r, g, bl = r>>8, g>>8, bl>>8
				switch {
				case r < 60 && g > 100 && g < 150 && bl > 190:
					blue++ // the histogram's #1c7ed6 (and the second site line)
				case r > 245 && g > 235 && g < 250 && bl > 170 && bl < 210:
					yellow++ // a search hit's #fff3bf
				case r > 150 && g > 40 && g < 120 && bl > 150:
					lines++ // purple and pink site lines (#ae3ec9, #e64980)
				}
			}
		}
		if dst := os.Getenv("MEMTRACE_KEEP_SCREENSHOT"); dst != "" {
			os.Rename(p, strings.TrimSuffix(dst, ".png")+"-"+name)
		}
		return
	}
	blue, yellow, lines := shot("page.png", page)
	t.Logf("page: %d blue, %d yellow, %d purple/pink pixels", blue, yellow, lines)
	if blue < 8000 || lines < 100 {
		t.Fatalf("the screenshot lacks the histogram or the site lines (%d blue, %d purple/pink pixels)", blue, lines)
	}
	before := yellow // flame frames have a few such pixels
	searched := filepath.Join(dir, "searched.html")
	run := `<script>(function(){var i=document.getElementById("tree-search");i.value="parser";i.dispatchEvent(new Event("input"));document.getElementById("trees").scrollIntoView();})();</script>`
	if err := os.WriteFile(searched, []byte(strings.Replace(text, "</body>", run+"</body>", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, yellow, _ = shot("searched.png", searched)
	t.Logf("searched: %d yellow pixels", yellow)
	if yellow < 2000 || yellow < 10*before {
		t.Fatalf("the searched page shows no highlighted rows (%d yellow pixels)", yellow)
	}
}

// htmlReadBack reads what a user sees of the run's end and the leaks into
// <pre id="readback">, as JSON: the summary's rows, the leaks ranking's
// title, column and rows, and the frames of the leaked-bytes flame graph.
const htmlReadBack = `<script>
(function () {
  var out = {summary: {}, frames: []};
  document.querySelectorAll("#summary table.kv tr").forEach(function (tr) {
    out.summary[tr.querySelector("th").textContent] = tr.querySelector("td").textContent;
  });
  var h = document.getElementById("rank-LEAKS");
  out.title = h ? h.textContent : "";
  var tbl = h ? h.nextElementSibling : null;
  out.rows = [];
  if (tbl && tbl.tagName === "TABLE") {
    out.column = tbl.querySelector("tr th:nth-child(6)").textContent;
    tbl.querySelectorAll("tr").forEach(function (tr, i) { if (i > 0) out.rows.push(tr.textContent); });
  }
  document.querySelectorAll("#flame-leaked g.f").forEach(function (g) { out.frames.push(g.getAttribute("data-n")); });
  var b = document.querySelector('#flamegraph button[data-cost="leaked"]');
  out.button = b ? b.textContent : "";
  var pre = document.createElement("pre");
  pre.id = "readback";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
`

// TestHTMLRunEndAndSuppressionsInChromium: in headless Chromium, the HTML
// report says how the run ended; an exited run's leaks leave out what the
// built-in suppressions hide (not ranked, not in the flame graph, counted
// in the summary); a detached run's blocks are still allocated at detach,
// not leaks, in the summary, the ranking and the flame graph's tab.
func TestHTMLRunEndAndSuppressionsInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts headless Chromium: make test runs it")
	}
	chromium := needTool(t, "chromium")
	dir := t.TempDir()
	type readBack struct {
		Summary map[string]string
		Title   string
		Column  string
		Rows    []string
		Frames  []string
		Button  string
	}
	read := func(name string, data []byte, args ...string) readBack {
		t.Helper()
		log := writeFile(t, name+".log", data)
		page := filepath.Join(dir, name+".html")
		if _, errs, code := runMain(t, append(append([]string{"--resolve", "0"}, args...), "--html", page, log)...); code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errs)
		}
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		script := strings.Replace(htmlReadBack, "LEAKS", strconv.Itoa(int(metricOf(t, "leaks"))), 1)
		tested := filepath.Join(dir, name+"-readback.html")
		if err := os.WriteFile(tested, []byte(strings.Replace(string(raw), "</body>", script+"</body>", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		dom, _ := runTool(t, 2*time.Minute, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir="+filepath.Join(dir, "profile"),
			"--dump-dom", "file://"+tested)
		mt := regexp.MustCompile(`<pre id="readback">([^<]*)</pre>`).FindStringSubmatch(dom)
		if mt == nil {
			t.Fatalf("%s: no read-back in the DOM:\n%.2000s", name, dom)
		}
		var rb readBack
		if err := json.Unmarshal([]byte(html.UnescapeString(mt[1])), &rb); err != nil {
			t.Fatalf("%s: %v: %s", name, err, mt[1])
		}
		t.Logf("%s: summary %q; %q (%q) %d rows; flame tab %q", name, rb.Summary, rb.Title, rb.Column, len(rb.Rows), rb.Button)
		return rb
	}
	anyHas := func(list []string, s string) bool {
		for _, x := range list {
			if strings.Contains(x, s) {
				return true
			}
		}
		return false
	}

	rb := read("pool", poolLog())
	if rb.Summary["run"] != "exited with status 0" || rb.Summary["total memory leaked"] != "150B (2 leaks)" ||
		!strings.HasPrefix(rb.Summary["suppressed leaks"], "73.00K (2 leaks") || rb.Summary["still allocated at detach"] != "" {
		t.Errorf("exited run's summary %q", rb.Summary)
	}
	if rb.Title != "Memory leaks" || rb.Column != "leaked" || len(rb.Rows) != 2 || !anyHas(rb.Rows, "keep") || !anyHas(rb.Rows, "mine_init") ||
		anyHas(rb.Rows, "libstdc++") || anyHas(rb.Rows, "__nss_") {
		t.Errorf("exited run's leaks ranking %q (%q): want keep() and mine_init, no suppressed block: %q", rb.Title, rb.Column, rb.Rows)
	}
	if !anyHas(rb.Frames, "keep") || anyHas(rb.Frames, "libstdc++") || anyHas(rb.Frames, "__nss_") {
		t.Errorf("leaked-bytes flame graph frames %q: want keep(), no suppressed block", rb.Frames)
	}

	rb = read("pool-all", poolLog(), "--disable-builtin-suppressions")
	if rb.Summary["total memory leaked"] != "73.15K (4 leaks)" || rb.Summary["suppressed leaks"] != "" || len(rb.Rows) != 4 || !anyHas(rb.Rows, "libstdc++") {
		t.Errorf("without the built-in list: summary %q, rows %q", rb.Summary, rb.Rows)
	}

	rb = read("detached", endLog(true))
	if rb.Summary["run"] != "detached" || rb.Summary["total memory leaked"] != "" ||
		rb.Summary["still allocated at detach"] != "1000B (1 blocks; not leaks: the process had not exited)" {
		t.Errorf("detached run's summary %q", rb.Summary)
	}
	if !strings.HasPrefix(rb.Title, "Still allocated at detach") || rb.Column != "still allocated" || len(rb.Rows) != 1 ||
		rb.Button != "bytes still allocated at detach" {
		t.Errorf("detached run: ranking %q, column %q, rows %q, flame tab %q", rb.Title, rb.Column, rb.Rows, rb.Button)
	}
	rb = read("interrupted", endLog(false))
	if rb.Summary["run"] != "interrupted" || rb.Summary["still allocated at detach"] == "" {
		t.Errorf("interrupted run's summary %q", rb.Summary)
	}
}
