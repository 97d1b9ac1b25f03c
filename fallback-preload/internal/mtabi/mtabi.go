package mtabi

import (
	"bytes"
	"fmt"
	"go/format"
	"regexp"
	"strconv"
	"strings"
)

// MaxHeader bounds the input: the header is a few KiB; anything far larger
// is not it.
const MaxHeader = 1 << 20

// Header is what Parse found.
type Header struct {
	Defines []Define
	Structs []Struct
}

// Define is `#define MT_NAME value` with an integer or a string value.
type Define struct {
	Name  string // as in C, MT_ included
	Line  int
	Int   uint64
	Text  string // the literal as written, without a suffix (integers)
	IsStr bool
	Str   string
}

// Struct is a `typedef struct { ... } mt_name;`.
type Struct struct {
	Name   string
	Line   int
	Fields []Field
	Size   int
	Align  int
}

// Field is one member; Count > 1 for an array. Padding members (names
// ending in '_') are kept: they take room.
type Field struct {
	Name   string
	Type   string
	Elem   int // bytes per element
	Count  int
	Offset int
}

// Size is the bytes the field takes.
func (f Field) Size() int { return f.Elem * f.Count }

// Padding reports whether the field is there only to take room.
func (f Field) Padding() bool { return strings.HasSuffix(f.Name, "_") }

var typeSizes = map[string]int{"uint8_t": 1, "uint16_t": 2, "uint32_t": 4, "uint64_t": 8}

var (
	reInt     = regexp.MustCompile(`^(0[xX][0-9a-fA-F]+|[0-9]+)[uUlL]*$`)
	reStr     = regexp.MustCompile(`^"([^"\\]*)"$`)
	reStructB = regexp.MustCompile(`^typedef\s+struct\s*(?:[A-Za-z_][A-Za-z0-9_]*\s*)?\{$`)
	reStructE = regexp.MustCompile(`^\}\s*([A-Za-z_][A-Za-z0-9_]*)\s*;$`)
	reDecl    = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)(?:\[([0-9]+)\])?$`)
)

type line struct {
	n    int // first physical line
	text string
}

// logicalLines drops comments (outside string literals) and joins lines
// continued with a backslash.
func logicalLines(src []byte) ([]line, error) {
	var out []line
	var cur strings.Builder
	start, n := 1, 1
	inStr, inBlock := false, false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case inBlock:
			if c == '*' && i+1 < len(src) && src[i+1] == '/' {
				inBlock = false
				i++
				cur.WriteByte(' ')
			} else if c == '\n' {
				n++
			}
			continue
		case inStr:
			if c == '\n' {
				return nil, fmt.Errorf("line %d: a string literal runs past the end of the line", n)
			}
			if c == '\\' && i+1 < len(src) && src[i+1] != '\n' {
				cur.WriteByte(c)
				i++
				c = src[i]
			} else if c == '"' {
				inStr = false
			}
			cur.WriteByte(c)
			continue
		}
		switch {
		case c == '"':
			inStr = true
			cur.WriteByte(c)
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			i-- // the newline is handled below
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			inBlock = true
			i++
		case c == '\\' && i+1 < len(src) && src[i+1] == '\n':
			cur.WriteByte(' ')
			i++
			n++
		case c == '\n':
			out = append(out, line{start, strings.TrimSpace(cur.String())})
			cur.Reset()
			n++
			start = n
		default:
			cur.WriteByte(c)
		}
	}
	if inBlock {
		return nil, fmt.Errorf("line %d: a comment is not closed", n)
	}
	if inStr {
		return nil, fmt.Errorf("line %d: a string literal is not closed", n)
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, line{start, s})
	}
	return out, nil
}

// Parse reads the header. Every MT_ define it cannot read is an error, so
// that nothing the Go side should know is skipped in silence.
func Parse(src []byte) (*Header, error) {
	if len(src) > MaxHeader {
		return nil, fmt.Errorf("the header is %d bytes, more than %d: not mt_abi.h", len(src), MaxHeader)
	}
	lines, err := logicalLines(src)
	if err != nil {
		return nil, err
	}
	h := &Header{}
	var st *Struct
	for _, l := range lines {
		if st != nil {
			if m := reStructE.FindStringSubmatch(l.text); m != nil {
				st.Name = m[1]
				if err := st.layout(); err != nil {
					return nil, fmt.Errorf("line %d: struct %s: %w", st.Line, st.Name, err)
				}
				h.Structs = append(h.Structs, *st)
				st = nil
				continue
			}
			if err := st.addFields(l.text); err != nil {
				return nil, fmt.Errorf("line %d: %w", l.n, err)
			}
			continue
		}
		if reStructB.MatchString(l.text) {
			st = &Struct{Line: l.n}
			continue
		}
		if rest, ok := strings.CutPrefix(l.text, "#"); ok {
			if err := h.directive(l.n, strings.TrimSpace(rest)); err != nil {
				return nil, fmt.Errorf("line %d: %w", l.n, err)
			}
		}
	}
	if st != nil {
		return nil, fmt.Errorf("line %d: a struct is not closed", st.Line)
	}
	return h, h.check()
}

func (h *Header) directive(n int, d string) error {
	rest, ok := strings.CutPrefix(d, "define")
	if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
		return nil
	}
	rest = strings.TrimSpace(rest)
	end := strings.IndexFunc(rest, func(r rune) bool {
		return !(r == '_' || r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z')
	})
	name, val := rest, ""
	if end >= 0 {
		name, val = rest[:end], rest[end:]
	}
	if !strings.HasPrefix(name, "MT_") {
		return nil
	}
	if strings.HasPrefix(val, "(") {
		return nil // a function-like macro: C's business
	}
	val = strings.TrimSpace(val)
	if val == "" {
		return nil // an include guard
	}
	dfn := Define{Name: name, Line: n}
	if m := reStr.FindStringSubmatch(val); m != nil {
		dfn.IsStr, dfn.Str = true, m[1]
	} else if m := reInt.FindStringSubmatch(val); m != nil {
		v, err := strconv.ParseUint(m[1], 0, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if len(m[1]) > 1 && m[1][0] == '0' && m[1][1] != 'x' && m[1][1] != 'X' {
			return fmt.Errorf("%s: octal literals are not read here; write it in decimal or hex", name)
		}
		dfn.Int, dfn.Text = v, m[1]
	} else {
		return fmt.Errorf("%s: the value must be an integer or a plain string literal for the Go side to read it", name)
	}
	h.Defines = append(h.Defines, dfn)
	return nil
}

func (st *Struct) addFields(s string) error {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	for _, decl := range strings.Split(s, ";") {
		decl = strings.TrimSpace(decl)
		if decl == "" {
			continue
		}
		typ, names, ok := strings.Cut(decl, " ")
		if !ok {
			return fmt.Errorf("%q: want TYPE name, name[N]", decl)
		}
		elem, ok := typeSizes[typ]
		if !ok {
			return fmt.Errorf("%q: only uint8_t, uint16_t, uint32_t and uint64_t fields are read here", typ)
		}
		for _, nm := range strings.Split(names, ",") {
			m := reDecl.FindStringSubmatch(strings.TrimSpace(nm))
			if m == nil {
				return fmt.Errorf("%q: want a name or name[N]", strings.TrimSpace(nm))
			}
			count := 1
			if m[2] != "" {
				c, err := strconv.Atoi(m[2])
				if err != nil || c < 1 || c > 1<<16 {
					return fmt.Errorf("%s: bad array length", m[1])
				}
				count = c
			}
			st.Fields = append(st.Fields, Field{Name: m[1], Type: typ, Elem: elem, Count: count})
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(s), ";") {
		return fmt.Errorf("%q: a declaration must end with ';'", s)
	}
	return nil
}

// layout places the fields as C does: each at the next multiple of its
// size, the struct padded to its largest member.
func (st *Struct) layout() error {
	if len(st.Fields) == 0 {
		return fmt.Errorf("no fields")
	}
	off, align := 0, 1
	seen := map[string]bool{}
	for i := range st.Fields {
		f := &st.Fields[i]
		if seen[f.Name] {
			return fmt.Errorf("field %s twice", f.Name)
		}
		seen[f.Name] = true
		off = (off + f.Elem - 1) / f.Elem * f.Elem
		f.Offset = off
		off += f.Size()
		align = max(align, f.Elem)
	}
	st.Align = align
	st.Size = (off + align - 1) / align * align
	return nil
}

func (h *Header) check() error {
	names := map[string]bool{}
	for _, d := range h.Defines {
		if names[d.Name] {
			return fmt.Errorf("line %d: %s is defined twice", d.Line, d.Name)
		}
		names[d.Name] = true
	}
	for _, s := range h.Structs {
		if names[s.Name] {
			return fmt.Errorf("line %d: struct %s twice", s.Line, s.Name)
		}
		names[s.Name] = true
	}
	return nil
}

// Struct returns the struct named name.
func (h *Header) Struct(name string) (*Struct, bool) {
	for i := range h.Structs {
		if h.Structs[i].Name == name {
			return &h.Structs[i], true
		}
	}
	return nil, false
}

// StructNames says how a struct's constants are called in Go: Prefix +
// Field + Suffix for each field's offset, Size for its size.
type StructNames struct {
	Prefix, Suffix, Size string
}

// PreloadNames are package preload's names for the header's structs.
var PreloadNames = map[string]StructNames{
	"mt_shm_hdr":   {Prefix: "h", Size: "hdrSize"},
	"mt_chunk_hdr": {Prefix: "c", Size: "chunkHdr"},
	"mt_rec":       {Prefix: "rec", Suffix: "Off", Size: "recSize"},
	"mt_file":      {Prefix: "file", Size: "fileSlot"},
}

var initialisms = map[string]string{"ID": "ID", "PID": "PID", "TID": "TID", "HW": "HW", "TS": "TS"}

// camel turns "STREAM_NEXT" or "stream_next" into "StreamNext".
func camel(s string) string {
	var b strings.Builder
	for _, w := range strings.Split(s, "_") {
		if w == "" {
			continue
		}
		u := strings.ToUpper(w)
		if i, ok := initialisms[u]; ok {
			b.WriteString(i)
			continue
		}
		b.WriteString(u[:1])
		b.WriteString(strings.ToLower(w[1:]))
	}
	return b.String()
}

// lowerFirst lowers the first word: "ShmMagic" -> "shmMagic", "PIDX" -> "pidX".
func lowerFirst(s, first string) string {
	return strings.ToLower(first) + s[len(first):]
}

// GoName is the Go constant for an MT_ define: MT_SHM_MAGIC -> shmMagic.
func GoName(cname string) string {
	s := strings.TrimPrefix(cname, "MT_")
	first, _, _ := strings.Cut(s, "_")
	return lowerFirst(camel(s), camel(first))
}

// Generate writes the Go file for package pkg; src names the header in the
// file's first line.
func (h *Header) Generate(pkg, src string, names map[string]StructNames) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by mtabigen from %s; DO NOT EDIT.\n\n", src)
	fmt.Fprintf(&b, "package %s\n\n", pkg)
	used := map[string]string{}
	use := func(goName, what string) error {
		if prev, ok := used[goName]; ok {
			return fmt.Errorf("%s and %s are both %s in Go", prev, what, goName)
		}
		used[goName] = what
		return nil
	}
	fmt.Fprintf(&b, "// The #defines of %s.\nconst (\n", src)
	for _, d := range h.Defines {
		g := GoName(d.Name)
		if err := use(g, d.Name); err != nil {
			return nil, err
		}
		if d.IsStr {
			fmt.Fprintf(&b, "\t%s = %s\n", g, strconv.Quote(d.Str))
		} else {
			fmt.Fprintf(&b, "\t%s = %s\n", g, d.Text)
		}
	}
	b.WriteString(")\n\n")
	for _, s := range h.Structs {
		nm, ok := names[s.Name]
		if !ok {
			return nil, fmt.Errorf("struct %s has no Go names (mtabi.PreloadNames)", s.Name)
		}
		fmt.Fprintf(&b, "// %s: the offsets of its fields, and its size.\nconst (\n", s.Name)
		for _, f := range s.Fields {
			if f.Padding() {
				continue
			}
			g := nm.Prefix + camel(f.Name) + nm.Suffix
			if err := use(g, s.Name+"."+f.Name); err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, "\t%s = %d\n", g, f.Offset)
		}
		if nm.Size != "" {
			if err := use(nm.Size, "sizeof "+s.Name); err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, "\t%s = %d\n", nm.Size, s.Size)
		}
		b.WriteString(")\n\n")
	}
	out, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("format the generated Go (a name that is not Go?): %w", err)
	}
	return out, nil
}
