package mtabi

import (
	"go/format"
	"os"
	"strings"
	"testing"
)

func TestParseDefinesAndStructs(t *testing.T) {
	src := `
#ifndef X_H
#define X_H
#define MT_ENV "A_B" // a comment
#define MT_MAGIC 0x48u /* another */
#define MT_COUNT 12
#define MT_PAIR(a, b) ((a) + (b))
#define OTHER 7
#define MT_OPS(X) \
	X(MALLOC, 1, "malloc") \
	X(NEW_ARR, 7, "new[]")
typedef struct {
	uint8_t a;   // at 0
	uint32_t b, c[3];
	uint16_t d;
	uint64_t e;
	uint8_t pad_[3];
} mt_thing;
#endif
`
	h, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	wantDefs := []Define{
		{Name: "MT_ENV", IsStr: true, Str: "A_B"},
		{Name: "MT_MAGIC", Int: 0x48, Text: "0x48"},
		{Name: "MT_COUNT", Int: 12, Text: "12"},
	}
	if len(h.Defines) != len(wantDefs) {
		t.Fatalf("defines %+v, want %+v", h.Defines, wantDefs)
	}
	for i, w := range wantDefs {
		d := h.Defines[i]
		if d.Name != w.Name || d.IsStr != w.IsStr || d.Str != w.Str || d.Int != w.Int || d.Text != w.Text {
			t.Errorf("define %d = %+v, want %+v", i, d, w)
		}
	}
	st, ok := h.Struct("mt_thing")
	if !ok {
		t.Fatalf("no struct in %+v", h.Structs)
	}
	// As C lays it out: b aligned to 4, e to 8, the size to 8.
	want := []struct {
		name      string
		off, size int
	}{{"a", 0, 1}, {"b", 4, 4}, {"c", 8, 12}, {"d", 20, 2}, {"e", 24, 8}, {"pad_", 32, 3}}
	if len(st.Fields) != len(want) {
		t.Fatalf("fields %+v", st.Fields)
	}
	for i, w := range want {
		f := st.Fields[i]
		if f.Name != w.name || f.Offset != w.off || f.Size() != w.size {
			t.Errorf("field %d = %s at %d (%d bytes), want %s at %d (%d)", i, f.Name, f.Offset, f.Size(), w.name, w.off, w.size)
		}
	}
	if st.Size != 40 || st.Align != 8 {
		t.Errorf("size %d align %d, want 40 8", st.Size, st.Align)
	}
	code, err := h.Generate("p", "x.h", map[string]StructNames{"mt_thing": {Prefix: "t", Suffix: "Off", Size: "thingSize"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`env   = "A_B"`, "magic = 0x48", "count = 12", "tAOff     = 0", "tEOff     = 24", "thingSize = 40"} {
		if !strings.Contains(string(code), w) {
			t.Errorf("generated code lacks %q:\n%s", w, code)
		}
	}
	if strings.Contains(string(code), "pad_") || strings.Contains(string(code), "other") || strings.Contains(string(code), "pair") || strings.Contains(string(code), "malloc") {
		t.Errorf("generated code has padding, a non-MT define or a macro:\n%s", code)
	}
}

func TestGoName(t *testing.T) {
	for in, want := range map[string]string{
		"MT_SHM_MAGIC": "shmMagic", "MT_R_PROC_EXIT": "rProcExit", "MT_CH_OWNED": "chOwned",
		"MT_PID_BASE": "pidBase", "MT_FRAME_NO_MOD": "frameNoMod",
	} {
		if got := GoName(in); got != want {
			t.Errorf("GoName(%s) = %s, want %s", in, got, want)
		}
	}
	if got := "h" + camel("hw"); got != "hHW" {
		t.Errorf("field hw = %s, want hHW", got)
	}
}

// Each header the Go side could misread is refused with the line.
func TestParseRefuses(t *testing.T) {
	for name, c := range map[string]struct{ src, want string }{
		"expression":    {"#define MT_X (1 << 3)\n", "MT_X: the value must be an integer"},
		"octal":         {"#define MT_X 0644\n", "octal"},
		"unknown type":  {"typedef struct {\n\tint a;\n} mt_s;\n", `"int": only uint8_t`},
		"pointer field": {"typedef struct {\n\tuint32_t *a;\n} mt_s;\n", "want a name"},
		"open struct":   {"typedef struct {\n\tuint32_t a;\n", "line 1: a struct is not closed"},
		"no semicolon":  {"typedef struct {\n\tuint32_t a\n} mt_s;\n", "must end with ';'"},
		"empty struct":  {"typedef struct {\n} mt_s;\n", "no fields"},
		"same field":    {"typedef struct {\n\tuint32_t a, a;\n} mt_s;\n", "field a twice"},
		"same define":   {"#define MT_A 1\n#define MT_A 2\n", "line 2: MT_A is defined twice"},
		"open comment":  {"/* x\n", "comment is not closed"},
		"open string":   {"#define MT_S \"abc\n", "past the end of the line"},
	} {
		_, err := Parse([]byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one with %q", name, err, c.want)
		}
	}
	big := make([]byte, MaxHeader+1)
	if _, err := Parse(big); err == nil {
		t.Error("a header over MaxHeader was read")
	}
}

func TestGenerateRefusesCollisionsAndUnnamedStructs(t *testing.T) {
	h, err := Parse([]byte("typedef struct {\n\tuint32_t a;\n} mt_s;\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Generate("p", "x.h", nil); err == nil || !strings.Contains(err.Error(), "no Go names") {
		t.Errorf("unnamed struct: err = %v", err)
	}
	h, err = Parse([]byte("#define MT_A_B 1\n#define MT_A__B 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Generate("p", "x.h", nil); err == nil || !strings.Contains(err.Error(), "both aB") {
		t.Errorf("two defines with one Go name: err = %v", err)
	}
}

// FuzzParse: whatever the input, Parse returns (no panic) and what it
// accepts generates Go that gofmt reads, with every field inside its
// struct.
func FuzzParse(f *testing.F) {
	if src, err := os.ReadFile("../../c/mt_abi.h"); err == nil {
		f.Add(string(src))
	}
	for _, s := range []string{
		"#define MT_A 1\n",
		"#define MT_S \"x\\\"y\"\n",
		"#define MT_OPS(X) \\\n X(A, 1, \"a\") \\\n X(B, 2, \"b\")\n",
		"typedef struct {\n uint64_t a; uint8_t b[3];\n uint16_t c;\n} mt_s;\n",
		"typedef struct tag {\n uint32_t a;\n} mt_rec;\n",
		"/* // */ #define MT_X 0x10\n",
		"\"/*\" #define MT_Y 2\n",
		"#define MT_OPS(X)\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		h, err := Parse([]byte(src))
		if err != nil {
			return
		}
		for _, s := range h.Structs {
			for _, fl := range s.Fields {
				if fl.Offset < 0 || fl.Offset+fl.Size() > s.Size || fl.Offset%fl.Elem != 0 {
					t.Fatalf("%s.%s at %d (%d bytes) in %d", s.Name, fl.Name, fl.Offset, fl.Size(), s.Size)
				}
			}
		}
		names := map[string]StructNames{}
		for i, s := range h.Structs {
			names[s.Name] = StructNames{Prefix: "s" + strings.Repeat("x", i), Size: "size" + strings.Repeat("x", i)}
		}
		code, err := h.Generate("p", "x.h", names)
		if err != nil {
			return
		}
		if _, err := format.Source(code); err != nil {
			t.Fatalf("generated code does not parse: %v\n%s", err, code)
		}
	})
}
