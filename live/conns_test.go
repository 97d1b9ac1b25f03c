package live

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func serveTest(t *testing.T, l Limits) (*Server, string) {
	t.Helper()
	m := NewModel()
	feed(m)
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := ServeLimits(ln, NewProfiler(m), l)
	t.Cleanup(srv.Close)
	return srv, ln.Addr().String()
}

// closedWithin says whether the server ends c within d: a read that
// returns EOF or a reset, not a timeout.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func getOK(t *testing.T, url string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: status %d", url, resp.StatusCode)
	}
}

// Many connections that send nothing: those beyond the cap are closed at
// once, the others when the header timeout ends them, and the server
// answers again after both.
func TestIdleConnectionsCappedAndTimedOut(t *testing.T) {
	const maxConns, opened = 8, 200
	var mu sync.Mutex
	var lines []string
	srv, addr := serveTest(t, Limits{MaxConns: maxConns, ReadHeaderTimeout: 500 * time.Millisecond, IdleTimeout: 500 * time.Millisecond,
		WriteTimeout: 5 * time.Second, Logf: func(f string, a ...any) {
			mu.Lock()
			lines = append(lines, f)
			mu.Unlock()
		}})
	conns := make([]net.Conn, 0, opened)
	for range opened {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial: %v (the server stopped accepting)", err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	for end := time.Now().Add(5 * time.Second); srv.Refused() < opened-maxConns && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	// The refusals are at once: the kept ones are still within their
	// header timeout.
	refused := 0
	for _, c := range conns {
		if closedWithin(c, 50*time.Millisecond) {
			refused++
		}
	}
	if refused < opened-maxConns {
		t.Fatalf("%d of %d idle connections closed at once, want at least %d (a cap of %d)", refused, opened, opened-maxConns, maxConns)
	}
	if n := srv.Refused(); n < opened-maxConns {
		t.Fatalf("Refused() = %d, want at least %d", n, opened-maxConns)
	}
	for i, c := range conns {
		if !closedWithin(c, 3*time.Second) {
			t.Fatalf("connection %d still open 3 s after a header timeout of 500 ms", i)
		}
	}
	mu.Lock()
	if len(lines) != 1 {
		t.Errorf("%d refusal lines within a minute, want 1: %q", len(lines), lines)
	}
	mu.Unlock()
	getOK(t, "http://"+addr+"/metrics")
}

// A kept-alive connection that asks nothing more is closed after the idle
// timeout.
func TestKeepAliveClosedWhenIdle(t *testing.T) {
	_, addr := serveTest(t, Limits{MaxConns: 4, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 300 * time.Millisecond, WriteTimeout: 5 * time.Second})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("status %d, close %v: want a kept-alive 200", resp.StatusCode, resp.Close)
	}
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = br.ReadByte()
	if err == nil {
		t.Fatal("data after the response")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("a kept-alive idle connection still open after 5 s, idle timeout 300 ms")
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("closed after %v, before the idle timeout", d)
	}
}

// A delta window longer than the write timeout is answered.
func TestWindowOutlastsWriteTimeout(t *testing.T) {
	_, addr := serveTest(t, Limits{MaxConns: 4, ReadHeaderTimeout: time.Second, IdleTimeout: time.Second, WriteTimeout: 300 * time.Millisecond})
	getOK(t, "http://"+addr+"/debug/pprof/heap?seconds=1")
}

// With the reserve over all of memtrace's descriptors, every connection
// is refused (closed at once) and the server still accepts.
func TestReserveRefuses(t *testing.T) {
	srv, addr := serveTest(t, Limits{MaxConns: 64, Reserve: fdLimit() - 1, ReadHeaderTimeout: 5 * time.Second})
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if !closedWithin(c, 2*time.Second) {
			t.Fatal("a connection within the tracer's reserve was kept")
		}
		c.Close()
	}
	if srv.Refused() != 3 {
		t.Fatalf("Refused() = %d, want 3", srv.Refused())
	}
	if r := fdReserve(20000); r != 5000 {
		t.Fatalf("fdReserve(20000) = %d", r)
	}
	// The defaults keep the cap far below the descriptors left.
	if l := DefaultLimits(); l.MaxConns > (fdLimit()-l.Reserve)/2 {
		t.Fatalf("a cap of %d with %d of %d descriptors reserved", l.MaxConns, l.Reserve, fdLimit())
	}
}

func TestExposed(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:1": false, "127.9.9.9:1": false, "[::1]:1": false, "0.0.0.0:1": true, "[::]:1": true, "10.1.2.3:1": true} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := Exposed(a); got != want {
			t.Errorf("Exposed(%s) = %v, want %v", addr, got, want)
		}
	}
	if w := ExposedWarning(&net.TCPAddr{IP: net.IPv4zero, Port: 6060}); !strings.Contains(w, "0.0.0.0:6060") || strings.Contains(w, "\n") {
		t.Fatalf("warning %q", w)
	}
}

// TestNoResetBelowTheCap: 50 clients, fewer than the cap of 64, each send
// 20 requests, every one answered: with one shared pool that keeps 2 idle
// connections (Go's default client: it closes the others as they come
// back, before the server has seen the close), each client with its own
// kept-alive connection, and a new connection per request.
func TestNoResetBelowTheCap(t *testing.T) {
	const clients, requests = 50, 20
	for _, c := range []struct {
		name   string
		client func() *http.Client
	}{
		{"shared pool", func() func() *http.Client {
			shared := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
			return func() *http.Client { return shared }
		}()},
		{"kept alive", func() *http.Client {
			return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
		}},
		{"no keep-alive", func() *http.Client {
			return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && c.name != "shared pool" {
				t.Skip("-short: the shared pool is the one that left connections behind")
			}
			l := DefaultLimits()
			if clients >= l.MaxConns {
				t.Fatalf("%d clients reach the cap of %d", clients, l.MaxConns)
			}
			srv, addr := serveTest(t, l)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var errs []error
			for range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					hc := c.client()
					for range requests {
						resp, err := hc.Get("http://" + addr + "/metrics")
						if err == nil {
							_, err = io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
							if err == nil && resp.StatusCode != 200 {
								err = errors.New(resp.Status)
							}
						}
						if err != nil {
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
						}
					}
					hc.CloseIdleConnections()
				}()
			}
			wg.Wait()
			if len(errs) > 0 || srv.Refused() > 0 {
				t.Fatalf("%d of %d requests failed, %d connections refused; errors: %v", len(errs), clients*requests, srv.Refused(), errors.Join(errs...))
			}
		})
	}
}

// A connection whose handler has returned but which the server has not yet
// moved to idle holds its slot for a moment: its client may already have
// its answer and be dialling again. A connection then waits for that slot
// (bounded) instead of being refused; with nothing finishing the refusal is
// at once (TestIdleConnectionsCappedAndTimedOut).
func TestFinishingConnectionsSlotIsWaitedFor(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ll := newLimitListener(ln, Limits{MaxConns: 1})
	first, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	held, err := ll.Accept()
	if err != nil {
		t.Fatal(err)
	}
	ll.connState(held, http.StateActive)
	ll.finished(held)
	second, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	got := make(chan net.Conn, 1)
	go func() {
		c, err := ll.Accept()
		if err == nil {
			got <- c
		}
	}()
	time.Sleep(50 * time.Millisecond)
	// The server's next step for the finishing connection.
	ll.connState(held, http.StateIdle)
	select {
	case c := <-got:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatalf("the second connection was not accepted once the first went idle (%d refused)", ll.Refused())
	}
	if n := ll.Refused(); n != 0 {
		t.Fatalf("%d connections refused while one was finishing, want 0", n)
	}
}
