package logfmt

// FramePrefix starts every frame line: the prefix, two spaces and '#'
// before the frame's index.
const FramePrefix = TrackPrefix + "  #"

// maxFrameIndexDigits is the longest index FrameText accepts: 18 decimal
// digits never overflow the parser's uint64, so a line FrameText accepts
// is never one Parse refuses for its index.
const maxFrameIndexDigits = 18

// FrameText finds the text of a frame line after its index, trimmed of
// ASCII spaces as Parse trims it: line[start:end]. Two frame lines with
// equal text parse to the same frame whatever their index, so a reader
// that has parsed the text once can skip Parse for every later line
// that repeats it. ok is false for a line that is not a frame line of
// this form; Parse decides the rest (a text FrameText accepts may still
// be malformed).
func FrameText(line []byte) (start, end int, ok bool) {
	if len(line) <= len(FramePrefix) || string(line[:len(FramePrefix)]) != FramePrefix {
		return 0, 0, false
	}
	i := len(FramePrefix)
	for i < len(line) && line[i] >= '0' && line[i] <= '9' {
		i++
	}
	if n := i - len(FramePrefix); n == 0 || n > maxFrameIndexDigits {
		return 0, 0, false
	}
	e := len(line)
	for i < e && isSpace(line[i]) {
		i++
	}
	for e > i && isSpace(line[e-1]) {
		e--
	}
	if e == i {
		return 0, 0, false
	}
	return i, e, true
}

// isSpace is bytes.TrimSpace's ASCII set.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// MetaTS returns the ts= of a [memtrace] line's fields (Line.Rest), the
// time the line is about, for readers that only order lines; ok is false
// when the line has none or its value is not a number. Proc, lost, fd
// and snapshot lines carry one; a header or a thread line does not.
func MetaTS(rest []byte) (ts uint64, ok bool) {
	v, found := Field(Fields(rest), "ts")
	if !found {
		return 0, false
	}
	n, i, ok := parseDec([]byte(v), 0)
	if !ok || i != len(v) {
		return 0, false
	}
	return n, true
}
