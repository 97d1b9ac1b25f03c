package live

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Limits bound what clients of --http can take from memtrace: the file
// descriptors the tracer needs (each probe, link and ring buffer is one)
// and the time a connection may sit open.
type Limits struct {
	// MaxConns is how many connections may be open at once. One more
	// first takes the place of the connection that has waited longest
	// for its next request, if any (a kept-alive connection, or one its
	// client closed and the server has not read the end of yet: a
	// client that closes what its pool does not keep, Go's default
	// client, leaves those behind at every request), as nginx reclaims
	// its keep-alive connections; otherwise it is closed at once (its
	// client sees its connection reset), so that the kernel's accept
	// queue never fills and the server never stops accepting.
	MaxConns int
	// Reserve is how many of memtrace's file descriptors (its
	// RLIMIT_NOFILE) the server never uses: a connection whose
	// descriptor falls within the last Reserve is closed at once, so a
	// tracer that needs many descriptors (--follow over many processes)
	// finds them free.
	Reserve int
	// ReadHeaderTimeout bounds the wait for a request's headers,
	// IdleTimeout a kept-alive connection's wait for its next request,
	// WriteTimeout the answer of a request (a ?seconds=N window gets N
	// seconds more).
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	WriteTimeout      time.Duration
	// Logf, when set, is told of refused connections: the first, then
	// at most one line a minute with the count since.
	Logf func(format string, args ...any)
}

// DefaultLimits are memtrace's: far more connections than scrapers and a
// person's browser use, a quarter of memtrace's descriptors kept for the
// tracer, and a scraper's keep-alive (Prometheus scrapes every 15 to 60
// seconds) kept between scrapes.
func DefaultLimits() Limits {
	return Limits{MaxConns: 64, Reserve: fdReserve(fdLimit()), ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: 90 * time.Second, WriteTimeout: 2 * time.Minute}
}

// fdLimit is memtrace's soft RLIMIT_NOFILE (Go's runtime raises it to the
// hard limit at start-up), or 1024 when it cannot be read.
func fdLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 1024
	}
	if rl.Cur > 1<<30 {
		return 1 << 30
	}
	return int(rl.Cur)
}

func fdReserve(limit int) int {
	return max(32, limit/4)
}

// limitListener refuses connections beyond Limits.MaxConns, and those
// whose descriptor lies in the tracer's reserve (Linux gives the lowest
// free descriptor, so a high one means the table is nearly full).
type limitListener struct {
	net.Listener
	slots   chan struct{}
	fdMax   int // a descriptor at or above it is in the reserve
	logf    func(string, ...any)
	refused atomic.Uint64

	mu       sync.Mutex
	lastLog  time.Time
	untilLog uint64 // refusals since the last line

	idleMu sync.Mutex
	idle   map[net.Conn]time.Time // connections between requests, since when
	// finishing are the connections whose handler has returned but
	// which the server has not yet moved to idle or closed: its
	// response may already be with a client that has closed its end
	// and dialled again, so its slot is about to come back.
	finishing map[net.Conn]struct{}
	// changed is signalled when a connection goes idle or gives its
	// slot back, which is what a wait for a finishing one looks for.
	changed chan struct{}
}

// finishWait bounds Accept's wait for a finishing connection's slot: the
// server's own steps from a handler's return to the connection's next
// state, however loaded the machine.
const finishWait = time.Second

type connKey struct{}

func newLimitListener(ln net.Listener, l Limits) *limitListener {
	n := l.MaxConns
	if n <= 0 {
		n = 1
	}
	fdMax := 0
	if l.Reserve > 0 {
		fdMax = fdLimit() - l.Reserve
	}
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), fdMax: fdMax, logf: l.Logf, idle: map[net.Conn]time.Time{},
		finishing: map[net.Conn]struct{}{}, changed: make(chan struct{}, 1)}
}

// connContext is the server's ConnContext: it gives the handler its
// connection, for finished.
func (ll *limitListener) connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// track marks a request's connection finishing when h returns.
func (ll *limitListener) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
				ll.finished(c)
			}
		}()
		h.ServeHTTP(w, r)
	})
}

func (ll *limitListener) finished(c net.Conn) {
	ll.idleMu.Lock()
	ll.finishing[c] = struct{}{}
	ll.idleMu.Unlock()
}

func (ll *limitListener) anyFinishing() bool {
	ll.idleMu.Lock()
	defer ll.idleMu.Unlock()
	return len(ll.finishing) > 0
}

func (ll *limitListener) signal() {
	select {
	case ll.changed <- struct{}{}:
	default:
	}
}

// connState is the server's ConnState: it keeps the connections that
// wait for their next request, the ones Accept may close to make room.
func (ll *limitListener) connState(c net.Conn, st http.ConnState) {
	ll.idleMu.Lock()
	defer ll.idleMu.Unlock()
	delete(ll.finishing, c)
	if st == http.StateIdle {
		ll.idle[c] = time.Now()
		ll.signal()
	} else {
		delete(ll.idle, c)
	}
}

// closeIdle closes the connection that has waited longest for its next
// request, which gives its slot back; false if there is none.
func (ll *limitListener) closeIdle() bool {
	ll.idleMu.Lock()
	var oldest net.Conn
	var since time.Time
	for c, t := range ll.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	delete(ll.idle, oldest)
	ll.idleMu.Unlock()
	if oldest == nil {
		return false
	}
	oldest.Close()
	return true
}

// Accept returns the next connection the limits allow; refused ones are
// closed here and never reach the server. It blocks in the kernel's
// accept, and for a slot only while a connection is finishing (a
// bounded wait).
func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if ll.fdMax > 0 {
			if fd, ok := connFD(c); ok && fd >= ll.fdMax {
				// Counted before the close: whoever sees the close
				// sees the count.
				ll.refuse(fmt.Sprintf("memtrace's file descriptors are nearly all in use (the last %d are kept for tracing)", fdLimit()-ll.fdMax))
				c.Close()
				continue
			}
		}
		if lc := ll.slot(c); lc != nil {
			return lc, nil
		}
		ll.refuse(fmt.Sprintf("%d connections are open already", cap(ll.slots)))
		c.Close()
	}
}

// slot gives c a slot: a free one, or the one an idle connection held,
// or, while a connection is finishing, the one it is about to give back
// or the one it holds once idle. Nil when there is none: the connections
// that hold them are all in a request or have not sent one, so a wait
// would only delay the refusal.
func (ll *limitListener) slot(c net.Conn) net.Conn {
	var deadline <-chan time.Time
	for {
		select {
		case ll.slots <- struct{}{}:
			return &limitConn{Conn: c, release: ll.release}
		default:
		}
		// Only Accept takes slots, so the one a closed idle connection
		// gave back is there.
		if ll.closeIdle() {
			continue
		}
		if !ll.anyFinishing() {
			return nil
		}
		if deadline == nil {
			deadline = time.After(finishWait)
		}
		select {
		case <-ll.changed:
		case <-deadline:
			return nil
		}
	}
}

func (ll *limitListener) release() {
	<-ll.slots
	ll.signal()
}

// Refused is how many connections were refused.
func (ll *limitListener) Refused() uint64 { return ll.refused.Load() }

func (ll *limitListener) refuse(why string) {
	ll.refused.Add(1)
	if ll.logf == nil {
		return
	}
	ll.mu.Lock()
	defer ll.mu.Unlock()
	ll.untilLog++
	if !ll.lastLog.IsZero() && time.Since(ll.lastLog) < time.Minute {
		return
	}
	ll.logf("memtrace: --http: refused %d connection(s): %s", ll.untilLog, why)
	ll.lastLog, ll.untilLog = time.Now(), 0
}

func connFD(c net.Conn) (int, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	fd := -1
	if raw.Control(func(f uintptr) { fd = int(f) }) != nil || fd < 0 {
		return 0, false
	}
	return fd, true
}

// limitConn gives its slot back once, at its first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// Exposed says whether addr can be reached from other machines: any
// address but loopback's. The unspecified address (0.0.0.0, ::) is every
// interface's.
func Exposed(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return true
	}
	return !ta.IP.IsLoopback()
}

// ExposedWarning is the line memtrace prints when --http listens where
// others can reach it.
func ExposedWarning(addr net.Addr) string {
	return fmt.Sprintf("memtrace: warning: --http listens on %s, not loopback: anyone who can reach it reads the traced programs' call stacks, file paths and allocation pattern, without authentication; put it behind a firewall or an authenticating proxy", addr)
}
