package report

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/ranking"
)

// UnmarshalJSON reads the rankings back by their keys, for the tests.
func (j *jsonRankings[E]) UnmarshalJSON(b []byte) error {
	var m map[string][]E
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	j.lists = make([][]E, numMetrics())
	for mt := range numMetrics() {
		j.lists[mt] = m[mt.desc().Key]
	}
	return nil
}

// get is the list of the ranking of that JSON key.
func (j jsonRankings[E]) get(key string) []E {
	for mt := range numMetrics() {
		if mt.desc().Key == key && int(mt) < len(j.lists) {
			return j.lists[mt]
		}
	}
	return nil
}

// metricOf is the ranking of that JSON key.
func metricOf(t testing.TB, key string) metric {
	t.Helper()
	for mt := range numMetrics() {
		if mt.desc().Key == key {
			return mt
		}
	}
	t.Fatalf("no ranking has the key %q", key)
	return 0
}

// Each row is whole: a view that reads an empty title or wording would
// print nothing for it, silently.
func TestRankingRowsComplete(t *testing.T) {
	flags, keys := map[string]bool{}, map[string]bool{}
	for mt := range numMetrics() {
		d := mt.desc()
		if d.Flag == "" || d.Key == "" || d.Title == "" || d.HTMLTitle == "" || d.Help == "" || d.Head == "" || d.Sub == "" {
			t.Errorf("ranking %d lacks a field: %+v", mt, *d)
		}
		if flags[d.Flag] || keys[d.Key] {
			t.Errorf("ranking %q: its flag or key is another's too", d.Key)
		}
		flags[d.Flag], keys[d.Key] = true, true
		if d.Figure >= ranking.NumFigures || d.Figure.Name() == "" {
			t.Errorf("ranking %q: figure %d is none", d.Key, d.Figure)
		}
		if !d.Tie.Entry() || d.Tie.Merge() != ranking.Sum {
			t.Errorf("ranking %q: its tie %q is not a summed figure every entry has", d.Key, d.Tie.Name())
		}
		if !d.Figure.Entry() && d.Column == "" {
			t.Errorf("ranking %q: its figure %q has no HTML column", d.Key, d.Figure.Name())
		}
		for _, tmpl := range []string{d.Head, d.Sub} {
			if _, ok := expandLine(tmpl, d, figs{}, false); !ok {
				t.Errorf("ranking %q: %q names a figure that is none", d.Key, tmpl)
			}
		}
	}
}

// expandLine fills every figure's placeholder, and says when one names
// nothing.
func TestExpandLine(t *testing.T) {
	d := metricOf(t, "temporary").desc()
	var f figs
	f[fTemp], f[fCalls] = 3, 12
	if got, ok := expandLine("{cost} of {calls}{share} from", d, f, false); !ok || got != "3 of 12 (25.00%) from" {
		t.Errorf("got %q %v", got, ok)
	}
	if got, ok := expandLine("{cost}{share}", d, f, true); !ok || got != "+3" {
		t.Errorf("signed: got %q %v", got, ok)
	}
	if got, ok := expandLine("{nothing} {calls", d, f, false); ok || got != "{nothing} {calls" {
		t.Errorf("unknown placeholder: got %q %v", got, ok)
	}
	for fig := range ranking.NumFigures {
		f[fig] = 2048
		if got, ok := expandLine("{"+fig.Name()+"}", d, f, false); !ok || got == "" {
			t.Errorf("figure %q: got %q %v", fig.Name(), got, ok)
		}
	}
}

// Every figure has its key in a JSON entry, whether every entry has it or
// only a ranking by it: a figure the JSON does not know is caught here,
// not dropped.
func TestJSONHasEveryFigure(t *testing.T) {
	for fig := range ranking.NumFigures {
		var f figs
		f[fig] = 12345
		var j jsonFigs
		if fig.Entry() {
			j = jsonFigsOf(f, 0)
		} else {
			p := j.own(fig)
			if p == nil {
				t.Errorf("figure %q: no JSON field", fig.Name())
				continue
			}
			v := f[fig]
			*p = &v
		}
		b, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]int64
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m[fig.Name()] != 12345 {
			t.Errorf("figure %q: not in %s", fig.Name(), b)
		}
	}
}

// Every ranking, alone, in every view: its title, its lines, its JSON key
// and figure, its HTML table, its --diff form.
func TestEveryRankingInEveryView(t *testing.T) {
	log := writeFile(t, "known.log", knownLog())
	base := writeFile(t, "base.log", baseLog())
	for mt := range numMetrics() {
		d := mt.desc()
		t.Run(d.Key, func(t *testing.T) {
			var args []string
			for o := range numMetrics() {
				args = append(args, fmt.Sprintf("--%s=%d", o.desc().Flag, map[bool]int{true: 1}[o == mt]))
			}
			text, errs, code := runMain(t, append(args, "--resolve", "0", log)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			mustContain(t, text, d.Title+"\n")
			if strings.Contains(text, "{") || !strings.Contains(text, "calls") {
				t.Errorf("text lines not filled:\n%s", text)
			}
			for o := range numMetrics() {
				if o != mt && strings.Contains(text, o.desc().Title+"\n") {
					t.Errorf("%q shown though off", o.desc().Key)
				}
			}
			out, errs, code := runMain(t, append(args, "--resolve", "0", "--json", "-", log)...)
			if code != 0 {
				t.Fatalf("json: exit %d: %s", code, errs)
			}
			var raw struct {
				Rankings map[string][]map[string]any `json:"rankings"`
			}
			if err := json.Unmarshal([]byte(out), &raw); err != nil {
				t.Fatal(err)
			}
			list := raw.Rankings[d.Key]
			if len(list) == 0 {
				t.Fatalf("JSON has no %q ranking: %v", d.Key, raw.Rankings)
			}
			if _, ok := list[0][d.Figure.Name()]; !ok {
				t.Errorf("JSON entry lacks %q: %v", d.Figure.Name(), list[0])
			}
			for o := range numMetrics() {
				if v, ok := raw.Rankings[o.desc().Key]; o != mt && (v != nil || ok != o.desc().On) {
					t.Errorf("JSON ranking %q off: %v, present %v", o.desc().Key, v, ok)
				}
			}
			html, errs, code := runMain(t, append(args, "--resolve", "0", "--html", "-", log)...)
			if code != 0 {
				t.Fatalf("html: exit %d: %s", code, errs)
			}
			mustContain(t, html, fmt.Sprintf("<h3 id=\"rank-%d\">%s</h3>", mt, esc(d.HTMLTitle)), `<td class="key">`)
			diff, errs, code := runMain(t, append(args, "--resolve", "0", "-d", base, log)...)
			if code != 0 {
				t.Fatalf("diff: exit %d: %s", code, errs)
			}
			mustContain(t, diff, d.Title+" (LOG minus BASE)\n")
		})
	}
}

// Every --cost names a summed figure, which a flame graph adds up, and the
// folded stacks of each carry that figure.
func TestFlameCosts(t *testing.T) {
	log := writeFile(t, "known.log", knownLog())
	for _, c := range ranking.FlameCosts {
		if c.Figure.Merge() != ranking.Sum || c.Title == "" {
			t.Errorf("--cost %s: figure %q", c.Name, c.Figure.Name())
		}
		out, errs, code := runMain(t, "--resolve", "0", "--cost", c.Name, "--folded", "-", log)
		if code != 0 || out == "" {
			t.Errorf("--cost %s: exit %d %s, %q", c.Name, code, errs, out)
		}
	}
}
