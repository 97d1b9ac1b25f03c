package logio

import (
	"bufio"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
)

// errStopped ends the decoder of a closed Follower.
var errStopped = errors.New("logio: following stopped")

// Follower reads a log file that is still being written (memview -f). Its
// Read returns io.EOF when nothing more is there yet, as an *os.File does
// at its end, so the caller can wait and read again
// (analysis.Follower does). A plain log is read straight from the file. A
// compressed one is decoded on a goroutine, from a reader that waits at
// the file's end instead of returning io.EOF: a decoder that met io.EOF in
// the middle of a block would take the log as cut short, where it was only
// not written yet.
type Follower struct {
	f    io.Reader
	poll time.Duration
	head []byte
	kind Kind
	dec  bool // decided
	err  error

	// compressed: the decoder's goroutine sends chunks on ch and, when
	// it ends, its error in end before closing ch.
	ch   chan []byte
	cur  []byte
	end  error
	stop chan struct{}
	once sync.Once
}

// followChunk and followChunks bound what the decoder runs ahead of the
// reader by.
const (
	followChunk  = 256 << 10
	followChunks = 4
)

// Follow reads f, which may still be empty or growing, waiting poll between
// looks at its end when it is compressed.
func Follow(f io.Reader, poll time.Duration) *Follower {
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	return &Follower{f: f, poll: poll, stop: make(chan struct{})}
}

// Kind is the log's form, Plain until its first bytes decided it.
func (l *Follower) Kind() Kind { return l.kind }

func (l *Follower) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	if !l.dec {
		// The magic number may be only partly written: keep what came
		// and decide when there is enough.
		buf := make([]byte, sniffLen)
		n, err := l.f.Read(buf[:sniffLen-len(l.head)])
		l.head = append(l.head, buf[:n]...)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		kind, undecided, serr := sniff(l.head, len(l.head) >= sniffLen)
		if serr != nil {
			l.err = serr
			return 0, serr
		}
		if undecided || len(l.head) == 0 {
			return 0, io.EOF
		}
		l.kind, l.dec = kind, true
		if kind != Plain {
			l.startDecoder()
		}
	}
	if l.kind == Plain {
		if len(l.head) > 0 {
			n := copy(p, l.head)
			l.head = l.head[n:]
			return n, nil
		}
		return l.f.Read(p)
	}
	if len(l.cur) == 0 {
		select {
		case c, ok := <-l.ch:
			if !ok {
				l.err = l.end
				return 0, l.err
			}
			l.cur = c
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, l.cur)
	l.cur = l.cur[n:]
	return n, nil
}

func (l *Follower) startDecoder() {
	l.ch = make(chan []byte, followChunks)
	pr := &prefixReader{head: l.head, r: &waitingReader{r: l.f, poll: l.poll, stop: l.stop}}
	var src io.Reader = pr
	// A byte reader, which gzip reads through as it is: Reset at a
	// member's end keeps what was read past it.
	var gzSrc *bufio.Reader
	if l.kind == Gzip {
		gzSrc = bufio.NewReader(src)
		src = gzSrc
	}
	l.head = nil
	go func() {
		defer close(l.ch)
		dec, zd, err := decoder(l.kind, src)
		if zd != nil {
			defer zd.Close()
		}
		if err != nil {
			l.end = stopAt(err, pr.n)
			return
		}
		// A multistream gzip reader looks for the next member's
		// header before it returns the last bytes of a member, and the
		// waiting reader never ends: a log whose last block came with
		// its member's end (a run that ends at once) never showed its
		// summary. Members are read one at a time instead, the next
		// header only after the bytes before it went out.
		zr, members := dec.(*gzip.Reader)
		if members {
			zr.Multistream(false)
		}
		for {
			buf := make([]byte, followChunk)
			n, err := dec.Read(buf)
			if n > 0 {
				select {
				case l.ch <- buf[:n]:
				case <-l.stop:
					l.end = errStopped
					return
				}
			}
			if members && errors.Is(err, io.EOF) {
				err = zr.Reset(gzSrc)
			}
			if err != nil {
				// The waiting reader never ends the input, so even
				// io.EOF here is not the log's end.
				if errors.Is(err, io.EOF) {
					err = ErrTruncated
				}
				l.end = stopAt(decodeError(l.kind, err, pr), pr.n)
				return
			}
		}
	}()
}

// Close stops the decoder's goroutine (at its next look at the file's end);
// it does not close the file.
func (l *Follower) Close() error {
	l.once.Do(func() { close(l.stop) })
	if l.err == nil {
		l.err = errClosed
	}
	return nil
}

// waitingReader reads a growing file; at its end it waits and looks again,
// until stop.
type waitingReader struct {
	r    io.Reader
	poll time.Duration
	stop <-chan struct{}
}

func (w *waitingReader) Read(p []byte) (int, error) {
	for {
		n, err := w.r.Read(p)
		if n > 0 {
			return n, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		t := time.NewTimer(w.poll)
		select {
		case <-w.stop:
			t.Stop()
			return 0, errStopped
		case <-t.C:
		}
	}
}
