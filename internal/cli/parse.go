package cli

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrHelp is -h or --help; ErrVersion is --version. The caller prints
// and exits 0.
var (
	ErrHelp    = flag.ErrHelp
	ErrVersion = errors.New("version")
)

// UsageError is a bad command line: one line, exit status 2.
type UsageError struct{ Msg string }

func (e UsageError) Error() string { return e.Msg }

// Parser parses a command line against a Command's table into values
// bound by canonical name; a flag.FlagSet holds them underneath, so any
// flag.Value serves.
type Parser struct {
	cmd *Command
	fs  *flag.FlagSet
}

// NewParser returns a parser for c; every flag of c (but help and
// version) must be bound before Parse.
func NewParser(c *Command) *Parser {
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	return &Parser{cmd: c, fs: fs}
}

func (p *Parser) flag(name string) *Flag {
	f := p.cmd.Lookup(name)
	if f == nil || f.Name() != name {
		panic(fmt.Sprintf("cli: %s has no flag --%s in its table", p.cmd.Name, name))
	}
	return f
}

// Var binds the flag named name (canonical) to v.
func (p *Parser) Var(v flag.Value, name string) {
	p.flag(name)
	p.fs.Var(v, name, "")
}

// String, Bool, Int, Float64 and Duration bind a flag to a variable,
// whose current value is the default.
func (p *Parser) String(v *string, name string) { p.flag(name); p.fs.StringVar(v, name, *v, "") }
func (p *Parser) Bool(v *bool, name string)     { p.flag(name); p.fs.BoolVar(v, name, *v, "") }
func (p *Parser) Int(v *int, name string)       { p.flag(name); p.fs.IntVar(v, name, *v, "") }
func (p *Parser) Float64(v *float64, name string) {
	p.flag(name)
	p.fs.Float64Var(v, name, *v, "")
}
func (p *Parser) Duration(v *time.Duration, name string) {
	p.flag(name)
	p.fs.DurationVar(v, name, *v, "")
}

// IsSet reports whether the flag (canonical name) was given.
func (p *Parser) IsSet(name string) bool {
	set := false
	p.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// Visit calls fn with the canonical name and value of each flag given.
func (p *Parser) Visit(fn func(name, value string)) {
	p.fs.Visit(func(f *flag.Flag) { fn(f.Name, f.Value.String()) })
}

func isSwitch(v flag.Value) bool {
	b, ok := v.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Parse parses args and returns the operands. An option is -name or
// --name, its value the next argument or after "="; "--" ends the
// options. Errors are UsageErrors in GNU's words, or ErrHelp, ErrVersion.
func (p *Parser) Parse(args []string) ([]string, error) {
	for _, f := range p.cmd.Flags {
		if n := f.Name(); n != "help" && n != "version" && p.fs.Lookup(n) == nil {
			panic(fmt.Sprintf("cli: %s: --%s is in the table but not bound", p.cmd.Name, n))
		}
	}
	var operands []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(operands, args[i+1:]...), nil
		}
		if len(a) < 2 || a[0] != '-' {
			if !p.cmd.Interspersed {
				return append(operands, args[i:]...), nil
			}
			operands = append(operands, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		typed, _, _ := strings.Cut(a, "=")
		f := p.cmd.Lookup(name)
		if short := p.cmd.Lookup(name[:min(len(name), 1)]); f == nil && !hasValue && short != nil && short.Arg != "" && len(name) > 1 && name[1] >= '0' && name[1] <= '9' {
			// getopt's and heaptrack_print's -n5, -l0: a letter and a
			// number. No long name starts with a digit after its first
			// letter, so nothing else is read this way.
			f, value, hasValue = short, name[1:], true
			typed = "-" + name[:1]
		}
		if f == nil {
			return nil, UsageError{p.unknown(typed, name)}
		}
		switch f.Name() {
		case "help":
			return nil, ErrHelp
		case "version":
			return nil, ErrVersion
		}
		v := p.fs.Lookup(f.Name()).Value
		switch {
		case hasValue:
		case isSwitch(v):
			value = "true"
			if f.OptionalArg && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				next := args[i+1]
				if p.fs.Set(f.Name(), next) == nil {
					i++
					continue
				}
				// A number after an on/off option is a value it does
				// not take (-l 2), not a log named 2 (./2 is one):
				// read as a log it would fail far from the mistake.
				if isNumber(next) {
					return nil, UsageError{fmt.Sprintf("invalid argument '%s' for '%s': %s", next, typed, onOffReason(f))}
				}
			}
		case i+1 < len(args):
			i++
			value = args[i]
		default:
			return nil, UsageError{fmt.Sprintf("option '%s' requires an argument %s (see %s --help)", typed, f.Arg, p.cmd.Name)}
		}
		if err := p.fs.Set(f.Name(), value); err != nil {
			reason := why(err)
			switch {
			case f.Arg == "DURATION":
				reason = "give a duration such as 500ms, 10s or 1m"
			case f.OptionalArg:
				reason = onOffReason(f)
			}
			return nil, UsageError{fmt.Sprintf("invalid argument '%s' for '%s': %s", value, typed, reason)}
		}
	}
	return operands, nil
}

// onOffReason is what an on/off option takes: "give 0 or 1".
func onOffReason(f *Flag) string { return "give " + strings.ReplaceAll(f.Arg, "|", " or ") }

// isNumber says whether s is a decimal number (2, -1, 0.5).
func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil && strings.IndexFunc(s, func(r rune) bool { return r != '.' && r != '-' && r != '+' && (r < '0' || r > '9') }) < 0
}

// why is a value's parse error without strconv's "strconv.ParseInt:
// parsing "x": " preamble.
func why(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && strings.HasPrefix(s, "strconv.") {
		s = s[i+2:]
	}
	switch s {
	case "parse error", "invalid syntax":
		return "not a number"
	case "value out of range":
		return "out of range"
	}
	return s
}

// unknown is the line for an option not in the table, with the nearest
// spelling when one is near enough.
func (p *Parser) unknown(typed, name string) string {
	msg := fmt.Sprintf("unknown option '%s'", typed)
	if s := Suggest(name, p.cmd.names()); s != "" {
		return msg + fmt.Sprintf("; did you mean '%s'?", dash(s))
	}
	return msg + fmt.Sprintf(" (see %s --help)", p.cmd.Name)
}

func (c *Command) names() []string {
	var out []string
	for _, f := range c.visible() {
		out = append(out, f.Names...)
	}
	return out
}

// BindRest binds every flag not bound yet to a value of its own kind that
// is read only through Visit: a command line whose mode uses few of the
// table's flags still parses as the others would (memtrace report
// --aggregate), and the caller refuses those given.
func (p *Parser) BindRest() {
	for _, f := range p.cmd.Flags {
		n := f.Name()
		if n == "help" || n == "version" || p.fs.Lookup(n) != nil {
			continue
		}
		if f.Arg == "" || f.OptionalArg {
			p.fs.Bool(n, false, "")
		} else {
			p.fs.String(n, "", "")
		}
	}
}
