package report

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
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
	type ev struct {
		tid      int64
		ts       uint64
		alloc    bool
		ptr      uint64
		freedBy  int64 // for an alloc: the thread that frees it, 0: never
		freeTime uint64
	}
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
