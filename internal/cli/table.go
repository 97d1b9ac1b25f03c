package cli

import (
	"sort"
	"strings"
)

// Flag is one option of a command: the table row its parsing, --help, its
// man page and the shell completions all read.
type Flag struct {
	// Names are the option's spellings, the long (canonical) one first;
	// each is accepted as -name and --name.
	Names []string
	// Arg is the value's placeholder (FILE); empty for a switch.
	Arg string
	// Help says what the option does, in one sentence.
	Help string
	// Default is shown as "(default X)" in --help and the man page.
	Default string
	// Complete says what a shell completes the value with: "file",
	// "dir", "pid", "command", a list of words ("dwarf fp"), or nothing.
	Complete string
	// OptionalArg: a switch that may also take the next argument as its
	// value when that parses (the report's "-l 0", as heaptrack_print).
	OptionalArg bool
	// Section is the heading the option is listed under ("" for the
	// command's first).
	Section string
	// Hidden options are parsed but listed nowhere (benchmark hooks).
	Hidden bool
	// Repeatable options may be given more than once (the report's
	// logs, bases and suppression files): completions offer them again.
	Repeatable bool
}

// Name is the canonical spelling, without dashes.
func (f *Flag) Name() string { return f.Names[0] }

// Spellings are the option as the user types it, shortest first: "-f",
// "--follow".
func (f *Flag) Spellings() []string {
	names := append([]string(nil), f.Names...)
	sort.SliceStable(names, func(i, j int) bool { return len(names[i]) == 1 && len(names[j]) != 1 })
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = dash(n)
	}
	return out
}

// Command is one of memtrace's commands: its synopsis, text and flags.
type Command struct {
	// Name is what the user types: "memtrace", "memtrace report".
	Name string
	// Summary is the man page's NAME line.
	Summary string
	// Synopsis lines, each without the leading "usage: ".
	Synopsis []string
	// Description is the text after the synopsis: paragraphs separated
	// by blank lines.
	Description string
	// Sections orders the flags' headings; the first is where flags
	// without one go.
	Sections []string
	Flags    []Flag
	// Footer ends --help (a pointer to the docs).
	Footer string
	// ManSections are the man page's sections of prose after the options
	// (OUTPUT FILES): a title and paragraphs separated by blank lines.
	ManSections []ManSection
	// Examples are the man page's EXAMPLES: a command line and what it
	// does.
	Examples []Item
	// ExitStatus, Environment and Files are the man page's sections of
	// those names: a status, a variable, a path, and what it means.
	ExitStatus  []Item
	Environment []Item
	Files       []Item
	// Interspersed: operands and options may come in any order (the
	// report's logs); otherwise the first operand ends the options
	// (memtrace's PROG ARGS).
	Interspersed bool
	// Operand is what a shell completes an operand with (as Flag's
	// Complete).
	Operand string
	// ManName is the man page's name (memtrace-report).
	ManName string
	// SeeAlso names the other man pages.
	SeeAlso []string
}

// ManSection is a man page section of text.
type ManSection struct{ Title, Text string }

// Item is one entry of a man page's list: a term (a command line, an exit
// status, a variable, a path) and what it means.
type Item struct{ Term, Text string }

// Lookup finds the flag with the spelling name (dashes stripped).
func (c *Command) Lookup(name string) *Flag {
	for i := range c.Flags {
		for _, n := range c.Flags[i].Names {
			if n == name {
				return &c.Flags[i]
			}
		}
	}
	return nil
}

// visible are the flags listed in help, man page and completions.
func (c *Command) visible() []*Flag {
	var out []*Flag
	for i := range c.Flags {
		if !c.Flags[i].Hidden {
			out = append(out, &c.Flags[i])
		}
	}
	return out
}

// bySection groups the visible flags under c.Sections, in table order.
func (c *Command) bySection() [][]*Flag {
	groups := make([][]*Flag, max(len(c.Sections), 1))
	for _, f := range c.visible() {
		i := 0
		for j, s := range c.Sections {
			if s == f.Section {
				i = j
			}
		}
		groups[i] = append(groups[i], f)
	}
	return groups
}

func dash(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// left is the option column of help: "-f, --follow LOG".
func (f *Flag) left() string {
	s := strings.Join(f.Spellings(), ", ")
	if f.Arg != "" {
		s += " " + f.Arg
	}
	return s
}
