package live

import (
	"bytes"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// TestWeight: the weights at the limits (a block much smaller than the
// rate stands for rate/size blocks and rate bytes; a much larger one for
// itself) and at size = rate.
func TestWeight(t *testing.T) {
	cases := []struct {
		size         uint64
		rate         float64
		count, bytes float64
	}{
		{100, 0, 1, 100},
		{0, 4096, 1, 0},
		{65536, 65536, 1 / (1 - math.Exp(-1)), 65536 / (1 - math.Exp(-1))},
		{1, 1 << 20, 1<<20 + 0.5, 1<<20 + 0.5},
		{1 << 30, 4096, 1, 1 << 30},
	}
	for _, c := range cases {
		n, b := Weight(c.size, c.rate)
		if math.Abs(n-c.count) > 1e-6*c.count || math.Abs(b-c.bytes) > 1e-6*c.bytes+1e-9 {
			t.Errorf("Weight(%d, %g) = %g, %g; want %g, %g", c.size, c.rate, n, b, c.count, c.bytes)
		}
	}
}

// TestSampledEstimate: blocks sampled by the countdown the BPF side runs
// (an exponential draw of mean rate per sample), weighed by the model,
// estimate the bytes and blocks of every size class, live and freed.
func TestSampledEstimate(t *testing.T) {
	// Enough samples of the smallest size (some 1,300 live) that 10 %
	// is over three deviations.
	const rate = 4096
	rng := rand.New(rand.NewPCG(1, 2))
	m := NewModel()
	m.SetSampleRate(rate)
	sizes := []uint64{16, 200, 4096, 100000}
	trueLive := map[uint64]float64{}
	left := rng.ExpFloat64() * rate
	var ptr uint64
	for i := 0; i < 2000000; i++ {
		size := sizes[i%len(sizes)]
		ptr++
		free := i%3 == 0 // a third freed at once
		if !free {
			trueLive[size] += float64(size)
		}
		if float64(size) < left {
			left -= float64(size)
			continue
		}
		left = rng.ExpFloat64() * rate
		m.Alloc(1, ptr, size, size, 0)
		if free {
			m.Free(1, ptr, 0)
		}
	}
	p := m.procs[1]
	for _, size := range sizes {
		est := p.byStack[size].inuseBytes
		if d := math.Abs(est-trueLive[size]) / trueLive[size]; d > 0.1 {
			t.Errorf("size %d: estimated %.0f live bytes, truly %.0f (%.1f %% off)", size, est, trueLive[size], 100*d)
		}
	}
}

// TestSampledProfile: a sampled model's profiles carry the rate as their
// period and say they are sampled; /debug/pprof/allocs is the same profile
// with alloc_space first.
func TestSampledProfile(t *testing.T) {
	m := NewModel()
	m.SetSampleRate(512 << 10)
	m.Alloc(1, 0x1000, 1024, 0, 0)
	pr := NewProfiler(m)
	var buf bytes.Buffer
	if err := pr.write(&buf, 0, nil, 0, "alloc_space", false); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if p.Period != 512<<10 || p.DefaultSampleType != "alloc_space" {
		t.Errorf("period %d, default %q", p.Period, p.DefaultSampleType)
	}
	_, wb := Weight(1024, 512<<10)
	if len(p.Sample) != 1 || p.Sample[0].Value[3] != int64(math.Round(wb)) {
		t.Errorf("samples %v, want one of %.0f in-use bytes", p.Sample, wb)
	}
	sampled := false
	for _, c := range p.Comments {
		sampled = sampled || bytes.Contains([]byte(c), []byte("sampled: --sample 524288"))
	}
	if !sampled {
		t.Errorf("comments %q do not say the profile is sampled", p.Comments)
	}
}

// TestLiveEndpoints: /debug/pprof/allocs beside /debug/pprof/heap; the
// index and /metrics say since when the processes are traced, and an
// attached run's profile says what it lacks.
func TestLiveEndpoints(t *testing.T) {
	m := NewModel()
	since := time.Unix(1700000000, 0)
	m.SetTracedSince(since, true)
	m.Alloc(1, 0x1000, 64, 0, 0)
	h := Handler(NewProfiler(m))
	get := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
		}
		return w
	}
	for path, def := range map[string]string{"/debug/pprof/heap": "inuse_space", "/debug/pprof/allocs": "alloc_space"} {
		p, err := profile.Parse(get(path).Body)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if p.DefaultSampleType != def || p.Period != 1 {
			t.Errorf("%s: default %q period %d, want %q and 1", path, p.DefaultSampleType, p.Period, def)
		}
		if !strings.Contains(strings.Join(p.Comments, "\n"), "blocks allocated before the attach are not in this profile") {
			t.Errorf("%s: comments %q say nothing of the attach", path, p.Comments)
		}
	}
	if body := get("/metrics").Body.String(); !strings.Contains(body, "memtrace_traced_since_seconds 1.7e+09") {
		t.Errorf("/metrics lacks memtrace_traced_since_seconds 1.7e+09:\n%s", body)
	}
	if body := get("/").Body.String(); !strings.Contains(body, "/debug/pprof/allocs") || !strings.Contains(body, "Traced since 2023-11-14T22:13:20Z") {
		t.Errorf("the index lacks allocs or the time tracing began:\n%s", body)
	}
}
