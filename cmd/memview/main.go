package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/internal/asuser"
	"github.com/memtrace/memtrace/internal/cli"
	"github.com/memtrace/memtrace/internal/logio"
	"github.com/memtrace/memtrace/symbols"
	"github.com/memtrace/memtrace/viewer"
)

type args struct {
	target string
	follow bool
	save   string
	dump   string
	stats  string // hidden: --load-stats LOG, for the benchmark
	fbench string // hidden: --follow-bench LOG, for the benchmark
	noSupp bool   // --disable-builtin-suppressions
}

func parseArgs(av []string) (args, error) {
	var a args
	var follow string
	fs := cli.NewParser(cli.Memview)
	fs.String(&follow, "follow")
	fs.String(&a.save, "save")
	fs.String(&a.dump, "dump-threads")
	fs.String(&a.stats, "load-stats")
	fs.String(&a.fbench, "follow-bench")
	fs.Bool(&a.noSupp, "disable-builtin-suppressions")
	rest, err := fs.Parse(av)
	if err != nil {
		return a, err
	}
	if fs.IsSet("follow") {
		a.follow, a.target = true, follow
	}
	for _, s := range rest {
		if a.target != "" {
			return a, cli.UsageError{Msg: fmt.Sprintf("more than one log given (%s and %s)", a.target, s)}
		}
		a.target = s
	}
	if a.dump == "" && a.stats == "" && a.fbench == "" && a.target == "" {
		return a, cli.UsageError{Msg: "no log given (see memview --help)"}
	}
	return a, nil
}

var tcpRe = regexp.MustCompile(`^[^/]*:[0-9]+$`)

func main() {
	// The model's columns hold no pointers, so collecting more often costs
	// little CPU and keeps the resident size near the live data.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	a, err := parseArgs(os.Args[1:])
	if errors.Is(err, cli.ErrHelp) {
		cli.Help(os.Stdout, cli.Memview)
		return
	}
	if errors.Is(err, cli.ErrVersion) {
		cli.PrintVersion(os.Stdout, "memview")
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "memview: %v\n", err)
		os.Exit(2)
	}
	if err := run(a); err != nil {
		fmt.Fprintf(os.Stderr, "memview: %v\n", err)
		os.Exit(1)
	}
}

func openLog(path string) (*os.File, error) {
	if path == "-" {
		return os.Stdin, nil
	}
	// Under sudo, as the user behind it: a root-only file stays closed.
	return logio.OpenPath(path, asuser.OpenFile)
}

func run(a args) error {
	if a.dump != "" {
		f, err := openLog(a.dump)
		if err != nil {
			return err
		}
		defer f.Close()
		// Without its events, as long as that gives the viewer's and the
		// report's figures: the stacks of live blocks are kept for the
		// suppressions, but the blocks whose frees were lost are only
		// told apart with every event kept, so a log with lost records
		// is read again whole (a stream, which cannot be, is read whole
		// from the start).
		m := analysis.New()
		st, serr := f.Stat()
		m.SummaryOnly = serr == nil && st.Mode().IsRegular()
		stop, err := readAll(m, f)
		if err != nil {
			return fmt.Errorf("read %s: %w", a.dump, err)
		}
		if !m.Counts.HasLogLine() {
			// Read to its end without a log line: not a log, in the
			// viewer's and the report's words (docs/cli.md).
			name := filepath.Base(a.dump)
			if a.dump == "-" {
				name = "stdin"
			}
			return analysis.NotLog(name, m.Counts)
		}
		if m.SummaryOnly && m.LostEvents > 0 {
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return fmt.Errorf("read %s again from its start: %w", a.dump, err)
			}
			m = analysis.New()
			if stop, err = readAll(m, f); err != nil {
				return fmt.Errorf("read %s: %w", a.dump, err)
			}
		}
		var sups []*analysis.Suppression
		if !a.noSupp {
			sups = analysis.BuiltinSuppressions()
		}
		if err := viewer.WriteThreadTableWith(os.Stdout, m, sups); err != nil {
			return err
		}
		if stop != nil {
			return fmt.Errorf("read %s: %w; the table covers what was read before", a.dump, stop)
		}
		return nil
	}
	if a.stats != "" {
		return loadStats(a.stats)
	}
	if a.fbench != "" {
		return followBench(a.fbench)
	}

	m := analysis.New()
	m.Demangle = symbols.Demangle
	cache := symbols.NewCache(nil)
	opt := viewer.Options{Source: a.target, Progress: new(atomic.Int64), Lines: cache, NameFrame: viewer.ELFNamer(cache), NoBuiltinSuppressions: a.noSupp}
	in, err := openInput(a, &opt)
	if err != nil {
		return err
	}
	defer in.close()
	scr, err := tcell.NewScreen()
	if err == nil {
		err = scr.Init()
	}
	if err != nil {
		return fmt.Errorf("open the terminal: %w (memview needs a terminal; --dump-threads works without)", err)
	}
	// A TCP stream is served once: connect only once nothing else can fail.
	if in.connect != nil {
		if err := in.connect(); err != nil {
			scr.Fini()
			return err
		}
	}
	src, streamErr := in.src, in.streamErr

	app := viewer.New(scr, m, opt)
	stop := make(chan struct{})
	var readStop error // why the reading stopped early, said again once the screen is closed
	var changed atomic.Bool
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		err := m.Stream(src, analysis.StreamOptions{Lock: &app.Mu, Progress: in.progress, Stop: stop, SizeHint: in.sizeHint, OnBatch: func() { changed.Store(true) }})
		if err == nil && streamErr != nil {
			err = streamErr()
		}
		app.Mu.Lock()
		readStop = err
		if errors.Is(err, logio.ErrTruncated) {
			// What was read is shown; the title has room for a short
			// word on why there is no more.
			err = errCut
		}
		select {
		case <-stop:
		default:
			app.SetEnded(err)
		}
		app.Mu.Unlock()
		changed.Store(true)
		// Sorting by size or thread is then instant.
		m.PrecomputeOrders(&app.Mu)
	}()
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if changed.Swap(false) {
					app.Notify()
				}
			}
		}
	}()
	var crash error
	func() {
		defer func() {
			if r := recover(); r != nil {
				crash = fmt.Errorf("internal error (please report it): %v\n%s", r, debug.Stack())
			}
		}()
		app.Run()
	}()
	close(stop)
	scr.Fini()
	if crash != nil {
		return crash
	}
	app.Mu.Lock()
	rs := readStop
	app.Mu.Unlock()
	if rs != nil {
		return fmt.Errorf("read %s: %w; the viewer showed what was read before", opt.Source, rs)
	}
	return nil
}

// lineTee saves a stream to a file in whole lines, so that a stream cut
// mid-line still leaves a valid log. f is the file, or its compressor
// (-o FILE.zst), which ends a block within logio.FlushInterval of a
// Write: a memview killed mid-stream leaves a file that reads up to then.
type lineTee struct {
	f    io.WriteCloser
	tail []byte
}

func (t *lineTee) Write(p []byte) (int, error) {
	i := strings.LastIndexByte(string(p), '\n')
	if i < 0 {
		t.tail = append(t.tail, p...)
		return len(p), nil
	}
	if len(t.tail) > 0 {
		if _, err := t.f.Write(t.tail); err != nil {
			return 0, err
		}
		t.tail = t.tail[:0]
	}
	if _, err := t.f.Write(p[:i+1]); err != nil {
		return 0, err
	}
	t.tail = append(t.tail, p[i+1:]...)
	return len(p), nil
}

// loadStats loads a log fully, as the TUI does, and prints the time and
// peak memory: the benchmark's "open" figure.
func loadStats(path string) error {
	f, err := openLog(path)
	if err != nil {
		return err
	}
	defer f.Close()
	t0 := time.Now()
	m := analysis.New()
	m.Demangle = symbols.Demangle
	if _, err := readAll(m, f); err != nil {
		return err
	}
	load := time.Since(t0)
	// The TUI sorts by every key once the log is read: its memory is
	// part of opening a log.
	var mu sync.Mutex
	m.PrecomputeOrders(&mu)
	t1 := time.Now()
	q := analysis.NewQuery()
	sel := m.Select(&q, nil)
	first := time.Since(t1)
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	n, b := m.Leaks()
	fmt.Printf("load %.3fs  first-select %.3fs  allocs %d  selected %d  leaks %d (%d bytes)  stacks %d  maxrss %d MB  gomaxprocs %d\n",
		load.Seconds(), first.Seconds(), m.Len(), len(sel), n, b, m.NumStacks(), ru.Maxrss/1024, runtime.GOMAXPROCS(0))
	return nil
}

// followBench follows a log that another process is writing, as memview -f
// does, and reports when it had read everything: the time it caught up
// after the file stopped growing (the writer's end), as Unix nanoseconds,
// so the benchmark can subtract the writer's end time.
func followBench(path string) error {
	f, err := openLog(path)
	if err != nil {
		return err
	}
	defer f.Close()
	m := analysis.New()
	var mu sync.Mutex
	var progress atomic.Int64
	stop := make(chan struct{})
	fr := logio.Follow(f, followPoll)
	defer fr.Close()
	go m.Stream(&analysis.Follower{R: fr, Poll: 250 * time.Millisecond}, analysis.StreamOptions{Lock: &mu, Progress: &progress, Stop: stop})
	var caughtUp time.Time
	var lastSize int64 = -1
	stable := time.Now()
	for {
		time.Sleep(10 * time.Millisecond)
		st, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("stat the log: %w", err)
		}
		size := st.Size()
		if size != lastSize {
			lastSize, stable = size, time.Now()
		}
		if progress.Load() >= size {
			if caughtUp.IsZero() {
				caughtUp = time.Now()
			}
		} else {
			caughtUp = time.Time{}
		}
		if !caughtUp.IsZero() && time.Since(stable) > 2*time.Second && size > 0 {
			close(stop)
			mu.Lock()
			n := m.Len()
			mu.Unlock()
			fmt.Printf("caught-up-ns %d allocs %d bytes %d\n", caughtUp.UnixNano(), n, size)
			return nil
		}
	}
}

// errCut ends a compressed log that was cut short (a killed writer).
var errCut = errors.New("compressed log ends early (cut)")

// followPoll is how often a followed compressed log's decoder looks at
// the end of the file for more.
const followPoll = 100 * time.Millisecond

// readAll reads a whole log, plain or compressed, into m. stop is why
// its reading stopped before the end (a cut or damaged compressed log, a
// read error), with what came before in m; err refuses an input that is
// not a log (nothing of one read), a FIFO or device included that sent no
// log line within logio.FirstLineWait. Once one came, a FIFO is read to
// its end however long its writer stalls, as cat reads it. An input that
// ended without a log line returns neither: m.Counts says so.
func readAll(m *analysis.Model, f *os.File) (stop, err error) {
	var first func()
	if st, serr := f.Stat(); serr == nil {
		first = logio.AwaitFirstLine(f, st)
	}
	lr := logio.NewReader(f)
	defer lr.Close()
	err = m.Stream(lr, analysis.StreamOptions{FirstLine: first})
	if err != nil && (errors.Is(err, analysis.ErrNotLog) || !m.Counts.HasLogLine()) {
		return nil, logio.NoLogLine(err, m.Counts.Lines)
	}
	return err, nil
}

// preludeLines counts the lines of what analysis.Prelude read, an
// unterminated last one included.
func preludeLines(pre []byte) int64 {
	n := int64(bytes.Count(pre, []byte{'\n'}))
	if len(pre) > 0 && pre[len(pre)-1] != '\n' {
		n++
	}
	return n
}

// checkIsLog reads a file (decompressed) up to its first log line, and
// rewinds it: a file without any (random bytes, some other program's
// output, an empty file) gets the report's one line instead of an empty
// viewer.
func checkIsLog(f *os.File, path string) error {
	lr := logio.NewReader(f)
	c, err := analysis.Sniff(lr)
	lr.Close()
	if err != nil && !errors.Is(err, logio.ErrTruncated) {
		return err
	}
	if !c.HasLogLine() {
		err := analysis.NotLog(filepath.Base(path), c)
		if c.Lines == 0 {
			return fmt.Errorf("%w (memview -f follows a log while it is written)", err)
		}
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("read the log again from its start: %w", err)
	}
	return nil
}

// countingReader counts the bytes read from a compressed file, for the
// viewer's "Loading N%" (the model counts decompressed bytes).
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// input is where the log comes from.
type input struct {
	src       io.Reader
	streamErr func() error // why a stream ended, if not normally
	connect   func() error // TCP: connect (sets src); nil otherwise
	closers   []func()
	// progress and sizeHint are the model's: decompressed bytes read and
	// the log's size when known (opt.Progress and opt.Size, for the
	// viewer, count a compressed file's own bytes).
	progress *atomic.Int64
	sizeHint int64
}

func (in *input) close() {
	for _, c := range in.closers {
		c()
	}
}

// openInput opens a file, stdin, or prepares a TCP stream (and its -o
// copy), failing with one clear error before anything is consumed.
func openInput(a args, opt *viewer.Options) (*input, error) {
	in := &input{progress: opt.Progress}
	isTCP := !a.follow && a.target != "-" && tcpRe.MatchString(a.target)
	if isTCP {
		if _, err := os.Stat(a.target); err == nil {
			isTCP = false // a file that happens to look like host:port
		}
	}
	switch {
	case isTCP:
		addr := a.target
		if strings.HasPrefix(addr, ":") {
			addr = "127.0.0.1" + addr
		}
		var tee *lineTee
		if a.save != "" {
			// Exclusive: an existing log is never overwritten, and
			// no symbolic link is followed.
			f, err := asuser.CreateNew(a.save)
			if err != nil {
				if errors.Is(err, os.ErrExist) {
					return nil, fmt.Errorf("%s exists: remove it or save to another name", a.save)
				}
				return nil, fmt.Errorf("create the saved log: %w", err)
			}
			// -o FILE.zst or FILE.gz saves it compressed.
			w, err := logio.Create(f, a.save)
			if err != nil {
				f.Close()
				os.Remove(a.save)
				return nil, err
			}
			tee = &lineTee{f: w}
			in.closers = append(in.closers, func() { w.Close() })
		}
		opt.Live = true
		in.connect = func() error {
			conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				if tee != nil {
					tee.f.Close()
					os.Remove(a.save)
				}
				return fmt.Errorf("connect to %s: %w (is memtrace --port or MEMTRACK_PORT running there?)", addr, err)
			}
			in.closers = append(in.closers, func() { conn.Close() })
			var w io.Writer
			if tee != nil {
				w = tee
			}
			sr := analysis.NewStreamReader(conn, w)
			in.src, in.streamErr = sr, sr.Err
			return nil
		}
	case a.save != "":
		return nil, errors.New("-o/--save only applies to a TCP stream ([HOST]:PORT)")
	case a.target == "-":
		if !a.follow {
			return nil, errors.New("read stdin with -f -")
		}
		// A compressed stream (cat run.log.zst | memview -f -) is
		// decompressed; its form is decided on the reading goroutine
		// when its first bytes come, so the viewer does not wait.
		lr := logio.NewReader(os.Stdin)
		sr := analysis.NewStreamReader(lr, nil)
		in.src, in.streamErr = sr, sr.Err
		opt.Live, opt.Source = true, "stdin"
	default:
		f, err := openLog(a.target)
		if err != nil {
			return nil, err
		}
		in.closers = append(in.closers, func() { f.Close() })
		st, err := f.Stat()
		if err == nil {
			opt.Size = st.Size()
		}
		in.sizeHint = opt.Size
		if a.follow {
			// A compressed log is decoded as it grows; its decoder waits
			// at the file's end rather than take it for the log's end.
			fr := logio.Follow(f, followPoll)
			in.closers = append([]func(){func() { fr.Close() }}, in.closers...)
			in.src, opt.Live = &analysis.Follower{R: fr, Poll: 250 * time.Millisecond}, true
			break
		}
		if err == nil && st.Mode().IsRegular() {
			if err := checkIsLog(f, a.target); err != nil {
				in.close()
				return nil, err
			}
		}
		if err == nil && !st.Mode().IsRegular() {
			// A FIFO or a device: it must send a log line within
			// logio.FirstLineWait, before the screen opens; what the
			// check read is read again.
			first := logio.AwaitFirstLine(f, st)
			lr := logio.NewReader(f)
			pre, found, perr := analysis.Prelude(lr)
			if first != nil {
				first()
			}
			if perr == nil && !found {
				// It ended without one.
				lr.Close()
				in.close()
				return nil, analysis.NotLog(filepath.Base(a.target), analysis.Counts{Lines: preludeLines(pre)})
			}
			if perr != nil {
				lr.Close()
				in.close()
				return nil, fmt.Errorf("read %s: %w", a.target, logio.NoLogLine(perr, preludeLines(pre)))
			}
			in.closers = append([]func(){func() { lr.Close() }}, in.closers...)
			in.src, in.sizeHint = io.MultiReader(bytes.NewReader(pre), lr), 0
			break
		}
		lr := logio.NewReader(f)
		kind, kerr := lr.Kind()
		if kerr != nil {
			in.close()
			return nil, kerr
		}
		in.closers = append([]func(){func() { lr.Close() }}, in.closers...)
		if kind == logio.Plain {
			if _, err := f.Seek(0, io.SeekStart); err == nil {
				in.src = f
			} else {
				in.src = lr // a pipe: what sniffing read is passed on
			}
			break
		}
		// Compressed: "Loading N%" counts the file's bytes; the model
		// gets no size hint from them.
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			in.src = lr
		} else {
			lr.Close()
			counted := logio.NewReader(&countingReader{r: f, n: opt.Progress})
			in.closers[0] = func() { counted.Close() }
			in.src = counted
			in.progress = new(atomic.Int64)
		}
		in.sizeHint = 0
	}
	return in, nil
}
