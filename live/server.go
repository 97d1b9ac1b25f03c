package live

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/google/pprof/profile"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/memtrace/memtrace/internal/heapprof"
	"github.com/memtrace/memtrace/symbols"
)

// MaxSeconds bounds a delta window: a handler holds a connection (and the
// window's copy of the per-stack counts) that long.
const MaxSeconds = 3600

// MaxWindows bounds the delta windows open at once, and so the memory
// their copies of the per-stack counts take.
const MaxWindows = 4

// ListenAddr turns --http's value into the address to listen on: a port
// alone ("6060", ":6060") is loopback's; any other host only when named.
func ListenAddr(v string) (string, error) {
	if _, err := strconv.ParseUint(v, 10, 16); err == nil {
		v = ":" + v
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return "", fmt.Errorf("--http %q: want [HOST]:PORT (127.0.0.1:6060): %w", v, err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
		return "", fmt.Errorf("--http %q: the port must be a number from 0 to 65535", v)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// Listen opens --http's listener, before anything is traced, so that a
// taken port is one line and nothing started.
func Listen(v string) (net.Listener, error) {
	addr, err := ListenAddr(v)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http: listen on %s: %w; choose another port", addr, err)
	}
	return ln, nil
}

// Profiler writes the model's profiles; one at a time, since symbol
// lookups share one cache.
type Profiler struct {
	m     *Model
	mu    sync.Mutex
	cache *symbols.Cache
}

// NewProfiler returns a profiler of m.
func NewProfiler(m *Model) *Profiler {
	return &Profiler{m: m, cache: symbols.NewCache(nil)}
}

// build is the heap profile of pid (0: every process); with w set, of
// the window of length dur since w started.
func (pr *Profiler) build(pid uint32, w *window, dur time.Duration, def string) (*profile.Profile, error) {
	samples := pr.m.samples(pid, w)
	mains := map[int64]string{}
	for _, s := range samples {
		if _, ok := mains[s.PID]; !ok {
			exe, _ := os.Readlink("/proc/" + strconv.FormatInt(s.PID, 10) + "/exe")
			mains[s.PID] = exe
		}
	}
	// A snapshot has no duration, as Go's heap profile: Parca and
	// Pyroscope take a profile with one for a delta (bytes per second,
	// summed when merged). Only a ?seconds=N window is one.
	o := &heapprof.Options{Symbols: pr.cache, Main: mains, PIDLabel: true, TimeNanos: time.Now().UnixNano(), DurationNanos: dur.Nanoseconds(),
		Root: func(pid int64) string {
			root := "/proc/" + strconv.FormatInt(pid, 10) + "/root"
			if _, err := os.Stat(root); err != nil {
				return "" // gone: its files by their own names
			}
			return root
		},
		Comments: pr.comments(), DefaultSampleType: def}
	if rate := pr.m.SampleRate(); rate > 0 {
		o.Period = int64(rate)
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return heapprof.Build(samples, o)
}

// write writes the profile as gzipped pprof, or with text in Go's legacy
// text heap format (?debug=1).
func (pr *Profiler) write(out io.Writer, pid uint32, w *window, dur time.Duration, def string, text bool) error {
	p, err := pr.build(pid, w, dur, def)
	if err != nil {
		return err
	}
	if text {
		return heapprof.WriteText(out, p)
	}
	if err := p.Write(out); err != nil {
		return fmt.Errorf("write pprof profile: %w", err)
	}
	return nil
}

// WriteProfile writes the heap profile of every traced process now.
func (pr *Profiler) WriteProfile(out io.Writer) error { return pr.write(out, 0, nil, 0, "", false) }

// comments say what the profile holds: sampled or every block, and what
// an attach leaves out.
func (pr *Profiler) comments() []string {
	c := []string{"memtrace live heap profile"}
	if mode := pr.m.Mode(); mode != "" {
		c = append(c, "mode="+mode)
	}
	if rate := pr.m.SampleRate(); rate > 0 {
		c = append(c, fmt.Sprintf("sampled: --sample %d: one allocation per %d bytes on average (exponential countdown per thread); "+
			"a sampled block of s bytes counts for s/(1-exp(-s/%d)) bytes and 1/(1-exp(-s/%d)) blocks, as Go's heap profile", rate, rate, rate, rate))
	}
	if since, attached := pr.m.TracedSince(); attached {
		c = append(c, fmt.Sprintf("attached at %s: blocks allocated before the attach are not in this profile",
			since.UTC().Format(time.RFC3339)))
	}
	return c
}

// query is what /debug/pprof/heap was asked.
type query struct {
	pid     uint32
	seconds int
	debug   bool // text, as Go's ?debug=1
}

// parseQuery reads ?pid=N, ?seconds=N and ?debug=N (N>0: text); other
// parameters (gc=1, which some scrapers send for Go programs) are ignored.
func parseQuery(raw string) (query, error) {
	var q query
	v, err := url.ParseQuery(raw)
	if err != nil {
		return q, errors.New("bad query string: use ?pid=N&seconds=N")
	}
	if s := v.Get("pid"); s != "" {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil || n == 0 {
			return q, errors.New("pid: want a process id (a positive number)")
		}
		q.pid = uint32(n)
	}
	if s := v.Get("seconds"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > MaxSeconds {
			return q, fmt.Errorf("seconds: want a number from 0 to %d", MaxSeconds)
		}
		q.seconds = n
	}
	if s := v.Get("debug"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return q, errors.New("debug: want 0 (gzipped pprof) or 1 (text)")
		}
		q.debug = n > 0
	}
	return q, nil
}

// Handler serves the model: /debug/pprof/heap, /metrics and the index.
// Only GET and HEAD are answered (405 otherwise): nothing here writes or
// controls anything.
func Handler(pr *Profiler) http.Handler {
	windows := make(chan struct{}, MaxWindows)
	reg := prometheus.NewRegistry()
	reg.MustRegister(&collector{m: pr.m}, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{Namespace: "memtrace"}),
		collectors.NewGoCollector())
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	mux := http.NewServeMux()
	idx := func(w http.ResponseWriter, r *http.Request) { index(pr, w) }
	mux.HandleFunc("/{$}", idx)
	mux.HandleFunc("/debug/pprof/{$}", idx)
	mux.Handle("/metrics", metrics)
	mux.HandleFunc("/debug/pprof/heap", func(w http.ResponseWriter, r *http.Request) { heap(pr, windows, w, r, "") })
	// Go's layout: the same profile, allocations first.
	mux.HandleFunc("/debug/pprof/allocs", func(w http.ResponseWriter, r *http.Request) { heap(pr, windows, w, r, "alloc_space") })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed: this server only reads", http.StatusMethodNotAllowed)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

const indexPage = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>memtrace</title></head><body>
<h1>memtrace</h1>
<ul>
<li><a href="/debug/pprof/heap">/debug/pprof/heap</a>: live heap by stack, gzipped pprof in Go's heap-profile layout (<code>go tool pprof http://HOST:PORT/debug/pprof/heap</code>); <code>?pid=N</code> one process, <code>?seconds=N</code> allocated during the next N seconds and still live then (a delta profile: the only one with a duration), <code>?debug=1</code> text as Go's</li>
<li><a href="/debug/pprof/allocs">/debug/pprof/allocs</a>: the same profile with the allocations (alloc_space) shown first, as Go's</li>
<li><a href="/metrics">/metrics</a>: Prometheus text format: live bytes and blocks per process, allocations and frees, lost records, probes attached, since when the processes are traced</li>
</ul>
%s</body></html>
`

func index(pr *Profiler, w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	var notes string
	if since, attached := pr.m.TracedSince(); !since.IsZero() {
		notes = "<p>Traced since " + since.UTC().Format(time.RFC3339)
		if attached {
			notes += " (attached: blocks allocated before then are not in the profiles)"
		}
		notes += ".</p>\n"
	}
	if rate := pr.m.SampleRate(); rate > 0 {
		notes += fmt.Sprintf("<p>Sampled (--sample %d): the figures are estimates, each sample weighed as Go's heap profile weighs its own.</p>\n", rate)
	}
	fmt.Fprintf(w, indexPage, notes)
}

func heap(pr *Profiler, windows chan struct{}, w http.ResponseWriter, r *http.Request, def string) {
	q, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var win *window
	var dur time.Duration
	if q.seconds > 0 {
		select {
		case windows <- struct{}{}:
			defer func() { <-windows }()
		default:
			http.Error(w, fmt.Sprintf("%d delta windows are open already: try again when one ends", MaxWindows), http.StatusServiceUnavailable)
			return
		}
		win = pr.m.startWindow()
		dur = time.Duration(q.seconds) * time.Second
		t := time.NewTimer(dur)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	var buf bytes.Buffer
	if err := pr.write(&buf, q.pid, win, dur, def, q.debug); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if q.debug {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(buf.Bytes())
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	name := "heap.pb.gz"
	if def != "" {
		name = "allocs.pb.gz"
	}
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.Write(buf.Bytes())
}

// Server is the running endpoint.
type Server struct {
	srv  *http.Server
	ln   *limitListener
	done chan struct{}
}

// Serve serves pr on ln until Close, within DefaultLimits.
func Serve(ln net.Listener, pr *Profiler) *Server { return ServeLimits(ln, pr, DefaultLimits()) }

// ServeLimits serves pr on ln until Close, within l.
func ServeLimits(ln net.Listener, pr *Profiler, l Limits) *Server {
	ll := newLimitListener(ln, l)
	h := Handler(pr)
	if l.WriteTimeout > 0 {
		h = windowDeadline(h, l.WriteTimeout)
	}
	s := &Server{srv: &http.Server{Handler: ll.track(h), ReadHeaderTimeout: l.ReadHeaderTimeout, IdleTimeout: l.IdleTimeout,
		WriteTimeout: l.WriteTimeout, ConnState: ll.connState, ConnContext: ll.connContext}, ln: ll, done: make(chan struct{})}
	if l.Logf != nil {
		// Go's own lines (an accept error, a broken request) are
		// memtrace's too: say whose they are.
		s.srv.ErrorLog = log.New(logfWriter(l.Logf), "memtrace: --http: ", 0)
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ll)
	}()
	return s
}

// Refused is how many connections the limits refused.
func (s *Server) Refused() uint64 { return s.ln.Refused() }

// windowDeadline gives a ?seconds=N request N seconds beyond the server's
// WriteTimeout, which would otherwise cut every window longer than it.
func windowDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if q, err := parseQuery(r.URL.RawQuery); err == nil && q.seconds > 0 {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Duration(q.seconds)*time.Second + d))
		}
		h.ServeHTTP(w, r)
	})
}

type logfWriter func(string, ...any)

func (f logfWriter) Write(p []byte) (int, error) {
	f("%s", bytes.TrimRight(p, "\n"))
	return len(p), nil
}

// Close stops the server: open requests (a delta window) are cut.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if s.srv.Shutdown(ctx) != nil {
		s.srv.Close()
	}
	<-s.done
}
