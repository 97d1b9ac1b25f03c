package live

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/memtrace/memtrace/internal/heapprof/heapproftest"
)

// TestProfilesReadAsScrapersRead holds every profile the endpoint and
// --profile-dir write to the rules Parca and Pyroscope read them by
// (heapproftest.Check): snapshots without a duration, ?seconds=N with its
// window, Go's sample types, the default, string labels with the pid.
func TestProfilesReadAsScrapersRead(t *testing.T) {
	m := NewModel()
	feed(m)
	pr := NewProfiler(m)
	h := Handler(pr)
	check := func(name string, b []byte, want heapproftest.Want) *profile.Profile {
		t.Helper()
		p := parseProfile(t, b)
		if bad := heapproftest.Check(p, want); len(bad) > 0 {
			t.Errorf("%s:\n%s", name, strings.Join(bad, "\n"))
		}
		if len(p.Sample) == 0 {
			t.Errorf("%s: no samples", name)
		}
		return p
	}
	snap := heapproftest.Want{PID: true}
	p := check("/debug/pprof/heap", get(t, h, "GET", "/debug/pprof/heap").Body.Bytes(), snap)
	// What the servers key their series by: the pid, as a string label.
	pids := map[string]bool{}
	for _, s := range p.Sample {
		pids[s.Label["pid"][0]] = true
	}
	if len(pids) != 2 || !pids["10"] || !pids["11"] {
		t.Errorf("pid labels %v, want 10 and 11", pids)
	}
	check("/debug/pprof/heap?pid=10", get(t, h, "GET", "/debug/pprof/heap?pid=10").Body.Bytes(), snap)
	check("/debug/pprof/allocs", get(t, h, "GET", "/debug/pprof/allocs").Body.Bytes(), heapproftest.Want{PID: true, Default: "alloc_space"})
	var buf bytes.Buffer
	if err := pr.WriteProfile(&buf); err != nil {
		t.Fatal(err)
	}
	check("--profile-dir", buf.Bytes(), snap)

	done := make(chan []byte)
	go func() { done <- get(t, h, "GET", "/debug/pprof/heap?seconds=1").Body.Bytes() }()
	time.Sleep(100 * time.Millisecond)
	m.Alloc(10, 0x5000, 50, 1, 41)
	check("/debug/pprof/heap?seconds=1", <-done, heapproftest.Want{PID: true, Delta: time.Second})
}

// TestDebugText: ?debug=1 is text in Go's legacy heap format, which
// pprof's own reader reads back to the figures of the gzipped profile.
func TestDebugText(t *testing.T) {
	m := NewModel()
	feed(m)
	h := Handler(NewProfiler(m))
	for _, path := range []string{"/debug/pprof/heap", "/debug/pprof/allocs"} {
		rec := get(t, h, "GET", path+"?debug=1")
		if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
			t.Fatalf("%s?debug=1: %d %s", path, rec.Code, rec.Header().Get("Content-Type"))
		}
		text := rec.Body.String()
		// Go's header: in-use objects and bytes, allocated objects and
		// bytes, over every process (the fork's 2 inherited blocks too).
		if !strings.HasPrefix(text, "heap profile: 5: 500 [8: 335] @ heap/2\n") {
			t.Fatalf("%s?debug=1 header:\n%s", path, text)
		}
		// The return addresses on the "@" line, as Go's; the call
		// instructions on the "#" lines.
		for _, want := range []string{`(?m)^3: 300 \[3: 300\] @ 0x401009 0x401120\n# labels: \{[^}]*"pid":"10"[^}]*\}\n#\t+0x401008\t+leak\(\)\t+/nonexistent/app\n`,
			`(?m)^2: 200 \[0: 0\] @ 0x401009 0x401120\n# labels: \{[^}]*"pid":"11"`, `(?m)^# memtrace live heap profile$`} {
			if !regexp.MustCompile(want).MatchString(text) {
				t.Fatalf("%s?debug=1 lacks %s:\n%s", path, want, text)
			}
		}
		lp, err := profile.ParseData(rec.Body.Bytes())
		if err != nil {
			t.Fatalf("pprof cannot read %s?debug=1: %v\n%s", path, err, text)
		}
		pp := parseProfile(t, get(t, h, "GET", path).Body.Bytes())
		if got, want := sums(t, lp, 0), sums(t, pp, 0); got != want {
			t.Fatalf("%s?debug=1 reads as %v, the profile says %v", path, got, want)
		}
	}
	if rec := get(t, h, "GET", "/debug/pprof/heap?debug=x"); rec.Code != 400 {
		t.Fatalf("?debug=x: %d", rec.Code)
	}
}
