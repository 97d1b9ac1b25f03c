package logio

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strings"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// ErrTruncated ends a compressed log that was cut short (a writer killed
// mid-stream, a partial copy): everything before the cut has been read.
// It wraps io.ErrUnexpectedEOF.
var ErrTruncated = fmt.Errorf("the compressed log ends early (its writer was killed, or the file was cut): %w", io.ErrUnexpectedEOF)

// ErrDamaged ends a compressed log whose data does not decode.
var ErrDamaged = errors.New("the compressed log is damaged")

// maxZstdWindow bounds the memory a zstd log may ask the reader for (the
// decoder allocates the window a frame declares up front): zstd(1)'s own
// default limit (--memory=128MB), so that what zstdcat decodes without
// options memtrace decodes too. memtrace writes with ZstdWindow. A
// variable so that the fuzz test can keep its inputs cheap.
var maxZstdWindow uint64 = 128 << 20

// maxZstdLong is the largest window zstd(1) writes or reads (--long=31,
// ZSTD_WINDOWLOG_MAX): a frame header that asks for more was not made by
// zstd, it is damage, and no --memory would decompress it.
const maxZstdLong = 1 << 31

// zstdHeaderMax is the longest zstd frame header: magic, descriptor,
// window descriptor, dictionary ID, content size.
const zstdHeaderMax = 4 + 1 + 1 + 4 + 8

var errClosed = errors.New("logio: use of a closed log")

// sniffLen is the longest magic number looked at.
const sniffLen = 10

// textLen is how much of a plain log's first read the text check looks at:
// what one read returned of it, beyond the magic numbers' sniffLen.
const textLen = 512

type magic struct {
	kind  Kind   // Plain: recognised but not read
	name  string // for the error of an unread kind
	tool  string
	bytes []byte
}

var magics = []magic{
	{kind: Zstd, bytes: []byte{0x28, 0xb5, 0x2f, 0xfd}},
	{kind: Gzip, bytes: []byte{0x1f, 0x8b, 0x08}},
	{name: "xz", tool: "xz -d", bytes: []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}},
	{name: "lz4", tool: "lz4 -d", bytes: []byte{0x04, 0x22, 0x4d, 0x18}},
	{name: "bzip2", tool: "bzip2 -d", bytes: []byte("BZh")}, // checked further in sniff
}

// sniff decides a log's form from its first bytes. undecided: head is a
// proper prefix of a magic number and more bytes may come (eof false).
// A zstd skippable frame (as pzstd and the seekable format write first)
// counts as zstd.
func sniff(head []byte, eof bool) (k Kind, undecided bool, err error) {
	for _, m := range magics {
		n := min(len(head), len(m.bytes))
		if !bytes.Equal(head[:n], m.bytes[:n]) {
			continue
		}
		if n < len(m.bytes) {
			if !eof {
				return Plain, true, nil
			}
			if n >= 2 && m.name == "" {
				// A file cut inside the magic number: the decoder
				// says it ends early.
				return m.kind, false, nil
			}
			continue
		}
		if m.name == "bzip2" {
			// "BZh" + block size digit + the block magic 0x314159265359.
			rest := []byte{0x31, 0x41, 0x59, 0x26, 0x53, 0x59}
			if len(head) < 10 {
				if eof {
					continue
				}
				return Plain, true, nil
			}
			if head[3] < '1' || head[3] > '9' || !bytes.Equal(head[4:10], rest) {
				continue
			}
		}
		if m.name != "" {
			return Plain, false, fmt.Errorf("the log is %s-compressed; memtrace reads zstd and gzip logs: decompress it first (%s FILE)", m.name, m.tool)
		}
		return m.kind, false, nil
	}
	if len(head) > 0 && head[0]&0xf0 == 0x50 {
		// Skippable frame: 0x184D2A50-5F, little-endian.
		want := []byte{0x2a, 0x4d, 0x18}
		n := min(len(head)-1, 3)
		if bytes.Equal(head[1:1+n], want[:n]) {
			if n == 3 {
				return Zstd, false, nil
			}
			if !eof {
				return Plain, true, nil
			}
		}
	}
	if err := textLike(head); err != nil {
		return Plain, false, err
	}
	return Plain, false, nil
}

// ErrNotText refuses a file whose first bytes are neither a compression
// format's magic number nor text.
var ErrNotText = errors.New("not a log: its first bytes are binary, neither text nor zstd or gzip data")

// textLike refuses head, the first bytes of an input that has no known
// magic number, when they are not text: a log is text, and reading binary
// data as lines would take a damaged compressed log (its magic number
// hit) or /dev/urandom for an empty log, or read it until killed. A NUL
// byte, or more than a tenth of the bytes control characters or broken
// UTF-8, is binary: a log's program output may hold some non-UTF-8
// bytes (Latin-1), never that many. A first few bytes within two bits of
// zstd's or gzip's magic number name the damage.
func textLike(head []byte) error {
	if len(head) == 0 {
		return nil
	}
	for _, m := range magics[:2] {
		if len(head) >= len(m.bytes) && bitsOff(head[:len(m.bytes)], m.bytes) <= 2 {
			return fmt.Errorf("not a log: its first bytes are nearly the %s magic number, a damaged %s-compressed log (%s -t FILE tells more); nothing before the damage can be read", m.kind, m.kind, m.kind)
		}
	}
	bad := 0
	for i := 0; i < len(head); {
		c := head[i]
		if c == 0 {
			return ErrNotText
		}
		if c < utf8.RuneSelf {
			if (c < 0x20 && !strings.ContainsRune("\t\n\r\f\v\b\x1b", rune(c))) || c == 0x7f {
				bad++
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(head[i:])
		if r == utf8.RuneError && n <= 1 {
			if !utf8.FullRune(head[i:]) {
				break // a rune cut by the end of what was read
			}
			bad++
			n = 1
		}
		i += n
	}
	if bad*10 > len(head) {
		return ErrNotText
	}
	return nil
}

// bitsOff is the number of bits in which a and b (of one length) differ.
func bitsOff(a, b []byte) int {
	n := 0
	for i := range a {
		n += bits.OnesCount8(a[i] ^ b[i])
	}
	return n
}

// Reader reads a log in any form, decompressed. Plain logs pass through
// unchanged.
type Reader struct {
	src    io.Reader // the bytes as stored
	head   []byte    // read from src while sniffing, not yet passed on
	kind   Kind
	sniffd bool
	dec    io.Reader // the decompressed log (or head then src)
	zd     *zstd.Decoder
	pr     *prefixReader // what the decoder reads, counted
	err    error
	// A gzip log is read a member at a time (gz, from gzSrc), the next
	// member's header at the Read after the last bytes of the one
	// before (gzNext): a multistream reader reads it before it returns
	// those bytes, and a FIFO sent one whole member, then stalled, held
	// back its lines and its reader's deadline for its first line came.
	gz     *gzip.Reader
	gzSrc  *bufio.Reader
	gzNext bool
}

// NewReader reads r, deciding its form at the first Read (or Kind): a
// stream that has sent nothing yet is not waited for here.
func NewReader(r io.Reader) *Reader { return &Reader{src: r} }

// Open is NewReader, with the form decided (and a compressed stream's
// header checked) at once: a log that memtrace cannot read fails here.
func Open(r io.Reader) (*Reader, error) {
	lr := NewReader(r)
	if _, err := lr.Kind(); err != nil {
		return nil, err
	}
	return lr, nil
}

// Kind decides the log's form, reading its first bytes if not done yet.
func (r *Reader) Kind() (Kind, error) {
	if !r.sniffd {
		r.start()
	}
	return r.kind, r.err
}

func (r *Reader) start() {
	r.sniffd = true
	buf := make([]byte, textLen)
	n, err := io.ReadAtLeast(r.src, buf, sniffLen)
	r.head = buf[:n]
	eof := err != nil
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		r.err = fmt.Errorf("read the log: %w", err)
		return
	}
	kind, _, serr := sniff(r.head, eof)
	if serr != nil {
		r.err = serr
		return
	}
	r.kind = kind
	r.pr = &prefixReader{head: r.head, r: r.src}
	var src io.Reader = r.pr
	if kind == Gzip {
		// A byte reader, which gzip reads through as it is: Reset at a
		// member's end keeps what was read past it.
		r.gzSrc = bufio.NewReader(r.pr)
		src = r.gzSrc
	}
	r.dec, r.zd, r.err = decoder(kind, src)
	if zr, ok := r.dec.(*gzip.Reader); ok {
		zr.Multistream(false)
		r.gz = zr
	}
	r.err = stopAt(r.err, r.pr.n)
	r.head = nil
}

// decoder starts decompressing src in the form k.
func decoder(k Kind, src io.Reader) (io.Reader, *zstd.Decoder, error) {
	switch k {
	case Zstd:
		// Concurrency 1 decodes on the reader's goroutine (the model's
		// parsers have the other CPUs); low memory and the window limit
		// keep a hostile or --long file from taking what it asks for.
		zd, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(maxZstdWindow))
		if err != nil {
			return nil, nil, fmt.Errorf("start the zstd decoder: %w", err)
		}
		return zd, zd, nil
	case Gzip:
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, nil, decodeError(Gzip, err, nil)
		}
		return zr, nil, nil
	}
	return src, nil, nil
}

// StopError is why a compressed log stopped decoding, and where: Offset
// is how many of the file's bytes the decoder had taken when it stopped
// (the damage is in the block that ends there, or the file ends there).
// It wraps ErrTruncated or ErrDamaged.
type StopError struct {
	Offset int64
	Err    error
}

func (e *StopError) Error() string {
	return fmt.Sprintf("%v, at byte %d of the file", e.Err, e.Offset)
}

func (e *StopError) Unwrap() error { return e.Err }

// stopAt places a decoding error of ErrTruncated or ErrDamaged at the
// file offset off; other errors (a read error, a closed log) pass.
func stopAt(err error, off int64) error {
	if errors.Is(err, ErrTruncated) || errors.Is(err, ErrDamaged) {
		return &StopError{Offset: off, Err: err}
	}
	return err
}

// decodeError names what went wrong in a compressed log, without any of
// its content. pr is what the decoder read (nil where it does not
// matter): the zstd decoder reports a damaged block's size and a frame's
// window above the limit alike, and only the frame header it took last
// tells them apart.
func decodeError(k Kind, err error, pr *prefixReader) error {
	if k == Plain {
		if pe := (*readError)(nil); errors.As(err, &pe) {
			return pe.err
		}
		return err
	}
	var pe *readError
	if errors.As(err, &pe) {
		return pe.err
	}
	switch {
	case errors.Is(err, ErrTruncated):
		return err
	case errors.Is(err, io.ErrUnexpectedEOF) && pr.moreLeft():
		// The decoder ran off a block's bit stream before the file's
		// end: damage, which a cut would not leave with bytes after it.
		return fmt.Errorf("%w (%s: a block's data ends inside the block)", ErrDamaged, k)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return ErrTruncated
	case (errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded)) &&
		pr.windowAsked() > maxZstdWindow && pr.windowAsked() <= maxZstdLong:
		mb := (pr.windowAsked() + 1<<20 - 1) >> 20
		return fmt.Errorf("the zstd log asks for %d MB of memory to decompress, more than the %d MB memtrace allows (made with zstd --long?): decompress it first (zstd -d --memory=%dMB FILE): %w", mb, maxZstdWindow>>20, mb, err)
	case errors.Is(err, errClosed) || errors.Is(err, errStopped):
		return err
	}
	if msg := err.Error(); strings.HasPrefix(msg, k.String()+": ") {
		return fmt.Errorf("%w (%s)", ErrDamaged, msg)
	}
	return fmt.Errorf("%w (%s: %v)", ErrDamaged, k, err)
}

// readError carries an error of the underlying reader (a file's EIO)
// through the decoder, so that it is not called damage.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// Read reads the decompressed log. A cut compressed log ends with
// ErrTruncated after everything before the cut.
func (r *Reader) Read(p []byte) (int, error) {
	if !r.sniffd {
		r.start()
	}
	if r.err != nil {
		return 0, r.err
	}
	if r.gzNext {
		r.gzNext = false
		if err := r.gz.Reset(r.gzSrc); err != nil {
			if errors.Is(err, io.EOF) {
				r.err = io.EOF
			} else {
				r.err = stopAt(decodeError(r.kind, err, r.pr), r.pr.n)
			}
			return 0, r.err
		}
	}
	n, err := r.dec.Read(p)
	if r.gz != nil && errors.Is(err, io.EOF) {
		r.gzNext = true
		if n > 0 {
			return n, nil
		}
		return r.Read(p)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		err = stopAt(decodeError(r.kind, err, r.pr), r.pr.n)
		r.err = err
	} else if err != nil && r.kind != Plain {
		// io.EOF from a decoder: the stream ended where a frame or
		// member did.
		r.err = io.EOF
	}
	return n, err
}

// Close releases the decoder; it does not close the underlying reader.
func (r *Reader) Close() error {
	if r.zd != nil {
		r.zd.Close()
		r.zd = nil
	}
	if r.err == nil {
		r.err = errClosed
	}
	return nil
}

// prefixReader returns head, then reads r; errors of r are marked as the
// reader's own, not the compressed data's. n counts the bytes returned,
// tail keeps the last of them; eof says r has ended.
type prefixReader struct {
	head  []byte
	r     io.Reader
	n     int64
	tail  [zstdHeaderMax]byte
	tailN int
	eof   bool
}

// moreLeft says the decoder stopped before the input's end: an
// unexpected end of data it met there is the data's own, not a cut.
// A reader that never ends (a followed file) always has more left.
func (p *prefixReader) moreLeft() bool {
	return p != nil && !p.eof
}

func (p *prefixReader) Read(b []byte) (int, error) {
	if len(p.head) > 0 {
		n := copy(b, p.head)
		p.head = p.head[n:]
		p.n += int64(n)
		p.keep(b[:n])
		return n, nil
	}
	n, err := p.r.Read(b)
	p.n += int64(n)
	p.keep(b[:n])
	if errors.Is(err, io.EOF) {
		p.eof = true
	}
	if err != nil && !errors.Is(err, io.EOF) {
		err = &readError{err}
	}
	return n, err
}

// keep appends b to tail, dropping what no longer fits.
func (p *prefixReader) keep(b []byte) {
	if len(b) >= len(p.tail) {
		p.tailN = copy(p.tail[:], b[len(b)-len(p.tail):])
		return
	}
	old := min(p.tailN, len(p.tail)-len(b))
	copy(p.tail[:], p.tail[p.tailN-old:p.tailN])
	p.tailN = old + copy(p.tail[old:], b)
}

// windowAsked is the window of the zstd frame whose header ends the bytes
// read so far, 0 if they do not end with one. The zstd decoder (one
// goroutine) reads exactly what it needs, so after a frame's window was
// refused the last bytes taken are that frame's header.
func (p *prefixReader) windowAsked() uint64 {
	if p == nil {
		return 0
	}
	t := p.tail[:p.tailN]
	for i := range t {
		var h zstd.Header
		if h.Decode(t[i:]) != nil || h.Skippable || h.HeaderSize != len(t)-i {
			continue
		}
		if h.SingleSegment {
			return h.FrameContentSize
		}
		return h.WindowSize
	}
	return 0
}
