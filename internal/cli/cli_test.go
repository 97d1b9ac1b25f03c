package cli

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/config"
	"github.com/memtrace/memtrace/viewer"
)

func TestSuggest(t *testing.T) {
	names := Memtrace.names()
	for _, c := range []struct{ typed, want string }{
		{"stack-dept", "stack-depth"},
		{"stack-dpeth", "stack-depth"}, // a swapped pair is one typo
		{"stackdepth", "stack-depth"},
		{"folow", "follow"},
		{"preloda", "preload"},
		{"mmap-file", "mmap-files"},
		{"trak", "track"},
		{"profile", "profile-dir"}, // the start of one name only
		{"stack", ""},              // the start of several
		{"x", ""},                  // a letter is never a long name's typo
		{"q", ""},
		{"frobnicate", ""},
		{"verbose", ""},
		{"no-uprobe", "no-uprobe-multi"},
	} {
		if got := Suggest(c.typed, names); got != c.want {
			t.Errorf("Suggest(%q) = %q, want %q", c.typed, got, c.want)
		}
	}
	if got := Suggest("dump-thread", Memview.names()); got != "dump-threads" {
		t.Errorf("memview: %q", got)
	}
	if got := Suggest("print-leak", Report.names()); got != "print-leaks" {
		t.Errorf("report: %q", got)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--stack-dept", "4"}, "unknown option '--stack-dept'; did you mean '--stack-depth'?"},
		{[]string{"-stack-dept=4"}, "unknown option '-stack-dept'; did you mean '--stack-depth'?"},
		{[]string{"--frobnicate"}, "unknown option '--frobnicate' (see memtrace --help)"},
		{[]string{"-o"}, "option '-o' requires an argument FILE (see memtrace --help)"},
		{[]string{"--stack-depth", "deep"}, "invalid argument 'deep' for '--stack-depth': not a number"},
		{[]string{"--interval=soon"}, "invalid argument 'soon' for '--interval': give a duration such as 500ms, 10s or 1m"},
		{[]string{"--follow=maybe"}, "invalid argument 'maybe' for '--follow': not a number"},
	} {
		p, _ := testParser()
		_, err := p.Parse(c.args)
		var ue UsageError
		if !errors.As(err, &ue) || ue.Msg != c.want {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
}

type parsed struct {
	o, track string
	depth    int
	follow   bool
	interval time.Duration
}

func testParser() (*Parser, *parsed) {
	var v parsed
	p := NewParser(Memtrace)
	p.String(&v.o, "o")
	p.String(&v.track, "track")
	p.Int(&v.depth, "stack-depth")
	p.Bool(&v.follow, "follow")
	p.Duration(&v.interval, "interval")
	p.BindRest()
	return p, &v
}

func TestParseSpellings(t *testing.T) {
	p, v := testParser()
	rest, err := p.Parse([]string{"-o", "x.log", "--stack-depth=8", "-f", "-track", "fd", "--interval", "1s", "prog", "-o", "arg"})
	if err != nil {
		t.Fatal(err)
	}
	if v.o != "x.log" || v.depth != 8 || !v.follow || v.track != "fd" || v.interval != time.Second {
		t.Errorf("parsed %+v", *v)
	}
	// memtrace's options end at PROG: its arguments are its own.
	if strings.Join(rest, " ") != "prog -o arg" {
		t.Errorf("operands %q", rest)
	}
	if !p.IsSet("follow") || p.IsSet("port") {
		t.Error("IsSet")
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"-v", "--help", "x"}} {
		p, _ := testParser()
		if _, err := p.Parse(args); !errors.Is(err, ErrHelp) {
			t.Errorf("%q: %v", args, err)
		}
	}
	p, _ = testParser()
	if _, err := p.Parse([]string{"--version"}); !errors.Is(err, ErrVersion) {
		t.Errorf("--version: %v", err)
	}
}

func TestParseOptionalArg(t *testing.T) {
	var leaks, peaks bool
	var logs []string
	p := NewParser(Report)
	p.Var(boolValue{&leaks}, "print-leaks")
	p.Var(boolValue{&peaks}, "print-peaks")
	p.BindRest()
	peaks = true
	rest, err := p.Parse([]string{"a.log", "-l", "-p", "0", "b.log", "--", "-c.log"})
	logs = rest
	if err != nil || !leaks || peaks || strings.Join(logs, " ") != "a.log b.log -c.log" {
		t.Errorf("leaks %v peaks %v logs %q err %v", leaks, peaks, logs, err)
	}
}

type boolValue struct{ p *bool }

func (b boolValue) String() string   { return "" }
func (b boolValue) IsBoolFlag() bool { return true }
func (b boolValue) Set(s string) error {
	switch s {
	case "1", "true":
		*b.p = true
	case "0", "false":
		*b.p = false
	default:
		return errors.New("want 1 or 0")
	}
	return nil
}

func TestHelpFromTable(t *testing.T) {
	var b strings.Builder
	Help(&b, Memtrace)
	out := b.String()
	for _, want := range []string{"usage: memtrace [options] -- PROG", "  -f, --follow", "  -o FILE", "  --stack-depth N", "--track LIST", "(default malloc,mmap)", "-h, --help", "--version"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"\n  -follow", "\n  -stack-depth", "(default 0)", "(default false)"} {
		if strings.Contains(out, bad) {
			t.Errorf("help has %q:\n%s", bad, out)
		}
	}
	for _, c := range Commands {
		b.Reset()
		Help(&b, c)
		for _, line := range strings.Split(b.String(), "\n") {
			if len(line) > lineWidth {
				t.Errorf("%s: line of %d columns: %q", c.Name, len(line), line)
			}
		}
		for _, f := range c.Flags {
			if !f.Hidden && !strings.Contains(b.String(), f.Spellings()[len(f.Spellings())-1]) {
				t.Errorf("%s: help lacks --%s", c.Name, f.Name())
			}
			if f.Hidden && strings.Contains(b.String(), f.Name()) {
				t.Errorf("%s: help shows hidden --%s", c.Name, f.Name())
			}
		}
	}
}

// TestTablesUnique: no spelling names two flags of a command.
func TestTablesUnique(t *testing.T) {
	for _, c := range Commands {
		seen := map[string]bool{}
		for _, n := range c.names() {
			if seen[n] {
				t.Errorf("%s: -%s twice", c.Name, n)
			}
			seen[n] = true
		}
	}
}

// TestGeneratedFresh: the committed man pages and completions are what
// the tables give (go generate ./internal/cli rewrites them).
func TestGeneratedFresh(t *testing.T) {
	for path, want := range Generated(viewer.HelpLines()) {
		got, err := os.ReadFile(filepath.Join("..", "..", path))
		if err != nil {
			t.Errorf("%v: run go generate ./internal/cli and commit", err)
			continue
		}
		if string(got) != want {
			t.Errorf("%s differs from internal/cli's tables: run go generate ./internal/cli and commit", path)
		}
	}
}

func TestPrintVersion(t *testing.T) {
	var b strings.Builder
	PrintVersion(&b, "memview")
	if b.String() != "memview "+Version+"\n" {
		t.Fatalf("got %q", b.String())
	}
}

// TestShortOptionValues: every single-letter option of the three commands
// that takes a value takes the next argument (-n 2) or the number stuck to
// it (-n2), never leaving it as an operand; an on/off option given a
// number it does not take (-l 2) is an error naming the option, not a log
// named 2 (issue 33).
func TestShortOptionValues(t *testing.T) {
	for _, c := range Commands {
		for i := range c.Flags {
			f := &c.Flags[i]
			var letter string
			for _, n := range f.Names {
				if len(n) == 1 {
					letter = n
				}
			}
			if letter == "" || f.Arg == "" {
				continue
			}
			for _, args := range [][]string{{"-" + letter, "1", "op"}, {"-" + letter + "1", "op"}} {
				p := NewParser(c)
				p.BindRest()
				rest, err := p.Parse(args)
				got := ""
				p.Visit(func(name, value string) {
					if name == f.Name() {
						got = value
					}
				})
				if err != nil || strings.Join(rest, " ") != "op" || (got != "1" && got != "true") {
					t.Errorf("%s %q: operands %q, --%s=%q, %v", c.Name, args, rest, f.Name(), got, err)
				}
			}
			if !f.OptionalArg {
				continue
			}
			for _, args := range [][]string{{"-" + letter, "2", "x.log"}, {"-" + letter + "2", "x.log"}} {
				p := NewParser(c)
				var on bool
				p.Var(boolValue{&on}, f.Name())
				p.BindRest()
				rest, err := p.Parse(args)
				var ue UsageError
				want := "invalid argument '2' for '-" + letter + "'"
				if !errors.As(err, &ue) || !strings.HasPrefix(ue.Msg, want) {
					t.Errorf("%s %q: operands %q, %v; want %q", c.Name, args, rest, err, want)
				}
			}
			// What is not a value is still an operand: a log after -l.
			p := NewParser(c)
			var on bool
			p.Var(boolValue{&on}, f.Name())
			p.BindRest()
			if rest, err := p.Parse([]string{"-" + letter, "x.log"}); err != nil || !on || strings.Join(rest, " ") != "x.log" {
				t.Errorf("%s -%s x.log: operands %q, on %v, %v", c.Name, letter, rest, on, err)
			}
		}
	}
}

// TestManPages: each page has the sections a man page is read by, in
// man-pages(7)'s order; names no docs/ file, which an installed copy
// lacks, but the topic documents make install puts under DocDir (each one
// of docs/); memview's lists every key of the viewer's help, from the
// same table; memtrace's every variable the config package reads.
func TestManPages(t *testing.T) {
	keys := viewer.HelpLines()
	for _, c := range Commands {
		var k []string
		if c == Memview {
			k = keys
		}
		page := Man(c, k)
		at := 0
		for _, sec := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXAMPLES", "EXIT STATUS", "ENVIRONMENT", "FILES", "SEE ALSO"} {
			i := strings.Index(page[at:], "\n.SH "+sec+"\n")
			if i < 0 {
				t.Errorf("%s.1: no %s after byte %d", c.ManName, sec, at)
				continue
			}
			at += i + 1
		}
		if m := docRef.FindString(page); m != "" {
			t.Errorf("%s.1 names %s, which an installed copy lacks", c.ManName, m)
		}
		if !strings.Contains(page, DocDir) {
			t.Errorf("%s.1 does not say where the documents it names are installed (%s)", c.ManName, DocDir)
		}
		for _, m := range regexp.MustCompile(`\b[a-z0-9]+\.md\b`).FindAllString(page, -1) {
			if _, err := os.Stat(filepath.Join("..", "..", "docs", m)); err != nil {
				t.Errorf("%s.1 names %s: %v", c.ManName, m, err)
			}
		}
	}
	page := Man(Memview, keys)
	if !strings.Contains(page, "\n.SH KEYS\n") {
		t.Fatal("memview.1 has no KEYS")
	}
	n, heading := 0, false
	for _, l := range keys {
		if l == "" || heading {
			// A blank line, then the heading of the view keys.
			heading = l == ""
			continue
		}
		key, text := splitKey(l)
		if key == "" || !strings.Contains(page, ".TP\n\\fB"+roffEscape(keyNames.Replace(key))+"\\fR\n"+roffLine(text)+"\n") {
			t.Errorf("memview.1 lacks the key %q: %q", key, text)
		}
		n++
	}
	if n < 40 {
		t.Errorf("memview.1: %d keys from the viewer's help, fewer than it has", n)
	}
	for path, text := range Generated(keys) {
		if strings.HasSuffix(path, ".1") && strings.Contains(text, ".SH KEYS") != strings.HasSuffix(path, "/memview.1") {
			t.Errorf("%s: KEYS is memview's only", path)
		}
	}
	env := ""
	for _, e := range Memtrace.Environment {
		env += " " + e.Term
	}
	for _, k := range config.Keys {
		if !strings.Contains(env, config.EnvName(k)) {
			t.Errorf("memtrace.1's ENVIRONMENT lacks %s", config.EnvName(k))
		}
	}
	if !strings.Contains(env, config.EnvConfig) {
		t.Errorf("memtrace.1's ENVIRONMENT lacks %s", config.EnvConfig)
	}
}
