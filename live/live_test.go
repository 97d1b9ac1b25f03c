package live

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/memtrace/memtrace/internal/heapprof/heapproftest"
)

var (
	stackA = []Frame{{Module: "/nonexistent/app", Symbol: "_Z4leakv", Offset: 9, Addr: 0x401009}, {Module: "/nonexistent/app", Symbol: "main", Offset: 20, Addr: 0x401120}}
	stackB = []Frame{{Module: "/nonexistent/app", Symbol: "_Z4tempv", Offset: 4, Addr: 0x402004}}
)

// feed plays a known history: pid 10 leaks 3×100 from A and allocates and
// frees 5×7 from B; pid 11 is a fork of 10 that frees one of the leaks.
func feed(m *Model) {
	m.Stack(1, stackA)
	m.Stack(2, stackB)
	for i := range uint64(3) {
		m.Alloc(10, 0x1000+i*0x100, 100, 1, i)
	}
	for i := range uint64(5) {
		m.Alloc(10, 0x9000, 7, 2, 10+i)
		m.Free(10, 0x9000, 10+i)
	}
	m.Free(10, 0xdead, 20) // unknown: nothing
	m.Fork(10, 11)
	m.Free(11, 0x1000, 30)
	m.Lost(2)
}

func sums(t *testing.T, p *profile.Profile, pid int64) [4]int64 {
	t.Helper()
	var s [4]int64
	for _, smp := range p.Sample {
		if pid != 0 && heapproftest.PID(smp) != pid {
			continue
		}
		for k := range s {
			s[k] += smp.Value[k]
		}
	}
	return s
}

func get(t *testing.T, h http.Handler, method, url string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, url, nil))
	return rec
}

func parseProfile(t *testing.T, b []byte) *profile.Profile {
	t.Helper()
	p, err := profile.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHeapProfileOfSyntheticEvents(t *testing.T) {
	m := NewModel()
	feed(m)
	h := Handler(NewProfiler(m))
	rec := get(t, h, "GET", "/debug/pprof/heap")
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	p := parseProfile(t, rec.Body.Bytes())
	if p.DefaultSampleType != "inuse_space" || len(p.SampleType) != 4 || p.SampleType[3].Type != "inuse_space" {
		t.Fatalf("types %v default %s", p.SampleType, p.DefaultSampleType)
	}
	if got := sums(t, p, 10); got != [4]int64{8, 335, 3, 300} {
		t.Fatalf("pid 10: %v", got)
	}
	// The fork's inherited blocks are live in the child, not allocated by it.
	if got := sums(t, p, 11); got != [4]int64{0, 0, 2, 200} {
		t.Fatalf("pid 11: %v", got)
	}
	for _, smp := range p.Sample {
		if heapproftest.PID(smp) == 10 && smp.Value[3] == 300 && smp.Location[0].Line[0].Function.Name != "leak()" {
			t.Fatalf("the leak's stack: %v", smp.Location[0].Line)
		}
	}
	rec = get(t, h, "GET", "/debug/pprof/heap?pid=11")
	p = parseProfile(t, rec.Body.Bytes())
	if got := sums(t, p, 0); got != [4]int64{0, 0, 2, 200} {
		t.Fatalf("?pid=11: %v", got)
	}
	m.Exec(11)
	m.ProcessExit(10)
	p = parseProfile(t, get(t, h, "GET", "/debug/pprof/heap").Body.Bytes())
	if len(p.Sample) != 0 {
		t.Fatalf("after exec and exit: %v", p.Sample)
	}
}

func TestDeltaWindow(t *testing.T) {
	m := NewModel()
	feed(m)
	h := Handler(NewProfiler(m))
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- get(t, h, "GET", "/debug/pprof/heap?seconds=1&pid=10") }()
	time.Sleep(300 * time.Millisecond)
	// During the window: one leak freed (from before: not in the window),
	// two new blocks of A, one of them freed again.
	m.Free(10, 0x1100, 40)
	m.Alloc(10, 0x5000, 50, 1, 41)
	m.Alloc(10, 0x5100, 60, 1, 42)
	m.Free(10, 0x5000, 43)
	rec := <-done
	p := parseProfile(t, rec.Body.Bytes())
	if got := sums(t, p, 0); got != [4]int64{2, 110, 1, 60} {
		t.Fatalf("window: %v", got)
	}
	if p.DurationNanos != int64(time.Second) {
		t.Fatalf("duration %d", p.DurationNanos)
	}
}

func TestOnlyReads(t *testing.T) {
	m := NewModel()
	h := Handler(NewProfiler(m))
	for _, method := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		for _, path := range []string{"/", "/debug/pprof/heap", "/metrics"} {
			rec := get(t, h, method, path)
			if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
				t.Fatalf("%s %s: %d", method, path, rec.Code)
			}
		}
	}
	if rec := get(t, h, "GET", "/debug/pprof/goroutine"); rec.Code != 404 {
		t.Fatalf("unknown path: %d", rec.Code)
	}
	for _, q := range []string{"pid=x", "pid=0", "seconds=-1", "seconds=99999", "pid=%zz"} {
		rec := get(t, h, "GET", "/debug/pprof/heap?"+q)
		if rec.Code != 400 || strings.Count(strings.TrimSpace(rec.Body.String()), "\n") != 0 {
			t.Fatalf("?%s: %d %q", q, rec.Code, rec.Body)
		}
	}
	rec := get(t, h, "GET", "/")
	for _, want := range []string{`href="/debug/pprof/heap"`, `href="/metrics"`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Fatalf("index lacks %s:\n%s", want, rec.Body)
		}
	}
}

func TestMetrics(t *testing.T) {
	m := NewModel()
	feed(m)
	m.Probes = func() int { return 4 }
	rec := get(t, Handler(NewProfiler(m)), "GET", "/metrics")
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	val := func(name, pid string) float64 {
		f := fams[name]
		if f == nil {
			t.Fatalf("no %s", name)
		}
		for _, mt := range f.Metric {
			ok := pid == ""
			for _, l := range mt.Label {
				if l.GetName() == "pid" && l.GetValue() == pid {
					ok = true
				}
			}
			if ok {
				switch f.GetType() {
				case dto.MetricType_COUNTER:
					return mt.Counter.GetValue()
				default:
					return mt.Gauge.GetValue()
				}
			}
		}
		t.Fatalf("no %s{pid=%q}", name, pid)
		return 0
	}
	for _, c := range []struct {
		name, pid string
		want      float64
	}{
		{"memtrace_live_bytes", "10", 300}, {"memtrace_live_blocks", "10", 3},
		{"memtrace_allocations_total", "10", 8}, {"memtrace_allocated_bytes_total", "10", 335},
		{"memtrace_frees_total", "10", 5}, {"memtrace_freed_bytes_total", "10", 35},
		{"memtrace_live_bytes", "11", 200}, {"memtrace_frees_total", "11", 1},
		{"memtrace_lost_records_total", "", 2}, {"memtrace_probes_attached", "", 4},
		{"memtrace_traced_processes", "", 2}, {"memtrace_stacks", "", 2},
	} {
		if got := val(c.name, c.pid); got != c.want {
			t.Errorf("%s{pid=%s} = %v, want %v", c.name, c.pid, got, c.want)
		}
	}
	if fams["memtrace_allocations_total"].GetType() != dto.MetricType_COUNTER || fams["memtrace_live_bytes"].GetType() != dto.MetricType_GAUGE {
		t.Fatal("metric types")
	}
	if fams["memtrace_process_resident_memory_bytes"] == nil {
		t.Fatal("no memtrace_process_resident_memory_bytes (memtrace's own RSS)")
	}
}

// A steady churn keeps the model's size where the live set is: nothing
// grows with the events.
func TestBoundedByLiveBlocks(t *testing.T) {
	m := NewModel()
	m.Stack(1, stackA)
	for i := range uint64(1_000_000) {
		ptr := 0x10000 + (i%1000)*16
		if i >= 1000 {
			m.Free(7, ptr, i)
		}
		m.Alloc(7, ptr, 16, 1+i%3, i)
	}
	p := m.procs[7]
	if len(p.blocks) != 1000 || len(p.byStack) != 3 || p.liveBytes != 16000 {
		t.Fatalf("blocks %d stacks %d live %v", len(p.blocks), len(p.byStack), p.liveBytes)
	}
}

func TestListenAddr(t *testing.T) {
	for in, want := range map[string]string{"6060": "127.0.0.1:6060", ":6060": "127.0.0.1:6060", "127.0.0.1:0": "127.0.0.1:0",
		"0.0.0.0:6060": "0.0.0.0:6060", "[::1]:80": "[::1]:80", "[::]:80": "[::]:80"} {
		if got, err := ListenAddr(in); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "host", "1.2.3.4:99999", "x:y", "70000"} {
		if _, err := ListenAddr(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestProfileDir(t *testing.T) {
	m := NewModel()
	feed(m)
	pr := NewProfiler(m)
	dir := t.TempDir()
	stop := make(chan struct{})
	done := make(chan struct{})
	var errs []error
	go func() {
		defer close(done)
		pr.WriteEvery(dir, 100*time.Millisecond, func(p string, write func(io.Writer) error) error {
			f, err := os.Create(p)
			if err != nil {
				return err
			}
			defer f.Close()
			return write(f)
		}, func(err error) { errs = append(errs, err) }, stop)
	}()
	time.Sleep(550 * time.Millisecond)
	close(stop)
	<-done
	ents, _ := os.ReadDir(dir)
	if len(ents) < 3 || len(errs) > 0 {
		t.Fatalf("%d files, errors %v", len(ents), errs)
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "heap-") || !strings.HasSuffix(e.Name(), ".pb.gz") {
			t.Fatalf("file %s", e.Name())
		}
		b, _ := os.ReadFile(dir + "/" + e.Name())
		if got := sums(t, parseProfile(t, b), 10); got != [4]int64{8, 335, 3, 300} {
			t.Fatalf("%s: %v", e.Name(), got)
		}
	}
	if ProfileName(time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)) != "heap-20260102T030405.006Z.pb.gz" {
		t.Fatal(ProfileName(time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)))
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"", "pid=1", "seconds=30", "pid=4294967295&seconds=3600", "pid=4294967296", "seconds=1e3", "gc=1", "%", "pid=1;x", "debug=1", "debug=-1", "debug=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := parseQuery(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of two lines: %q", err)
			}
			return
		}
		if q.seconds < 0 || q.seconds > MaxSeconds {
			t.Fatalf("seconds %d from %q", q.seconds, s)
		}
		// What was read reads back the same from its canonical form.
		debug := "0"
		if q.debug {
			debug = "1"
		}
		again, err := parseQuery("pid=" + strconv.FormatUint(uint64(q.pid), 10) + "&seconds=" + strconv.Itoa(q.seconds) + "&debug=" + debug)
		if q.pid == 0 {
			again, err = parseQuery("seconds=" + strconv.Itoa(q.seconds) + "&debug=" + debug)
		}
		if err != nil || again != q {
			t.Fatalf("%q → %+v, again %+v %v", s, q, again, err)
		}
	})
}

func FuzzListenAddr(f *testing.F) {
	for _, s := range []string{"6060", ":6060", "127.0.0.1:6060", "[::1]:1", "a:b", "", "::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ListenAddr(s)
		if err != nil {
			return
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			t.Fatalf("%q → %q: %v", s, a, err)
		}
	})
}

// Windows beyond MaxWindows are refused, and Close cuts the open ones at
// once: memtrace's exit never waits for a scraper.
func TestWindowsBoundedAndCut(t *testing.T) {
	for range 5 {
		m := NewModel()
		feed(m)
		ln, err := Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := Serve(ln, NewProfiler(m))
		url := "http://" + ln.Addr().String() + "/debug/pprof/heap?seconds=600"
		errs := make(chan error, MaxWindows)
		for range MaxWindows {
			c := &http.Client{Transport: &http.Transport{}}
			go func() {
				resp, err := c.Get(url)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				errs <- err
			}()
		}
		// The next one, once the others are open, is refused. A probe
		// that finds a slot free (the others not in yet) times out and
		// gives it back.
		time.Sleep(300 * time.Millisecond)
		probe := &http.Client{Timeout: 200 * time.Millisecond, Transport: &http.Transport{}}
		var code int
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			resp, err := probe.Get(url)
			if err != nil {
				continue
			}
			resp.Body.Close()
			if code = resp.StatusCode; code == http.StatusServiceUnavailable {
				break
			}
		}
		if code != http.StatusServiceUnavailable {
			t.Fatalf("window %d: status %d, want 503", MaxWindows+1, code)
		}
		start := time.Now()
		srv.Close()
		for range MaxWindows {
			select {
			case <-errs:
			case <-time.After(5 * time.Second):
				t.Fatal("an open window outlived Close by 5 s")
			}
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("Close took %v", d)
		}
	}
}

// BenchmarkAllocFree is the live model's own cost per malloc+free pair on
// the agent's CPU (a steady 10,000 live blocks over 8 stacks).
func BenchmarkAllocFree(b *testing.B) {
	m := NewModel()
	for i := range uint64(10000) {
		m.Alloc(1, 0x10000+i*64, 64, 1+i%8, i)
	}
	b.ResetTimer()
	for i := range uint64(b.N) {
		ptr := 0x10000 + (i%10000)*64
		m.Free(1, ptr, i)
		m.Alloc(1, ptr, 64, 1+i%8, i)
	}
}
