package cli

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// DocDir is where make install puts the topic documents (docs/*.md in the
// source), under its PREFIX; the man pages name them there, since an
// installed copy has no docs/.
const DocDir = "share/doc/memtrace"

// docRef is a reference to a topic document in the tables' text
// (docs/fleet.md), which the man pages give by its installed name.
var docRef = regexp.MustCompile(`\bdocs/([a-z0-9-]+\.md)\b`)

// Man is c's man page in roff (man(7)): NAME, SYNOPSIS, DESCRIPTION,
// OPTIONS (a subsection per section of the table), the table's prose
// sections, KEYS (keys: the viewer's help lines, memview's only), EXAMPLES,
// EXIT STATUS, ENVIRONMENT, FILES, SEE ALSO. It carries no date, so that it
// is the same on every run of the generator.
func Man(c *Command, keys []string) string {
	var b strings.Builder
	up := strings.ToUpper(c.ManName)
	fmt.Fprintf(&b, ".\\\" Generated from internal/cli/commands.go by internal/cli/gendocs; do not edit.\n")
	fmt.Fprintf(&b, ".TH %s 1 \"\" \"memtrace %s\" \"User Commands\"\n", up, Version)
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", roffEscape(c.ManName), roffEscape(c.Summary))
	b.WriteString(".SH SYNOPSIS\n.nf\n")
	for _, s := range c.Synopsis {
		b.WriteString(roffLine(s) + "\n")
	}
	b.WriteString(".fi\n.SH DESCRIPTION\n")
	paragraphs(&b, c.Description)
	b.WriteString(".SH OPTIONS\n")
	for i, group := range c.bySection() {
		if len(group) == 0 {
			continue
		}
		if i < len(c.Sections) && c.Sections[i] != "" {
			title, note, ok := strings.Cut(c.Sections[i], " (")
			fmt.Fprintf(&b, ".SS %s\n", roffEscape(capitalize(title)))
			if ok {
				b.WriteString(roffLine(capitalize(strings.TrimSuffix(note, ")"))+".") + "\n")
			}
		}
		for _, f := range group {
			b.WriteString(".TP\n")
			var sp []string
			for _, s := range f.Spellings() {
				sp = append(sp, "\\fB"+roffEscape(s)+"\\fR")
			}
			line := strings.Join(sp, ", ")
			if f.Arg != "" {
				line += " \\fI" + roffEscape(f.Arg) + "\\fR"
			}
			b.WriteString(line + "\n" + roffLine(f.helpText()) + "\n")
		}
	}
	for _, sec := range c.ManSections {
		fmt.Fprintf(&b, ".SH %s\n", roffEscape(strings.ToUpper(sec.Title)))
		paragraphs(&b, sec.Text)
	}
	if len(keys) > 0 {
		manKeys(&b, keys)
	}
	if len(c.Examples) > 0 {
		b.WriteString(".SH EXAMPLES\n")
		for i, e := range c.Examples {
			if i > 0 {
				b.WriteString(".PP\n")
			}
			b.WriteString(".nf\n.RS 4\n" + roffLine(e.Term) + "\n.RE\n.fi\n" + roffLine(e.Text) + "\n")
		}
	}
	items(&b, "EXIT STATUS", c.ExitStatus)
	items(&b, "ENVIRONMENT", c.Environment)
	items(&b, "FILES", c.Files)
	if len(c.SeeAlso) > 0 {
		b.WriteString(".SH SEE ALSO\n")
		var refs []string
		for _, s := range c.SeeAlso {
			name, sec, _ := strings.Cut(strings.TrimSuffix(s, ")"), "(")
			refs = append(refs, "\\fB"+roffEscape(name)+"\\fR("+sec+")")
		}
		b.WriteString(strings.Join(refs, ", ") + "\n")
	}
	return docRef.ReplaceAllString(b.String(), "$1")
}

// items writes a section of terms, each with its text indented below.
func items(b *strings.Builder, title string, list []Item) {
	if len(list) == 0 {
		return
	}
	b.WriteString(".SH " + title + "\n")
	for _, it := range list {
		b.WriteString(".TP\n\\fB" + roffEscape(it.Term) + "\\fR\n" + roffLine(it.Text) + "\n")
	}
}

// manKeys writes KEYS from the viewer's help lines: a key, two spaces or
// more, and its text; after a blank line, a heading and the keys it
// heads. The help overlay and the page are so made from one table.
func manKeys(b *strings.Builder, lines []string) {
	b.WriteString(".SH KEYS\nPress ? in memview for this list.\n")
	heading := false
	for _, l := range lines {
		switch {
		case l == "":
			heading = true
		case heading:
			fmt.Fprintf(b, ".SS %s\n", roffEscape(strings.TrimSuffix(l, ":")))
			heading = false
		default:
			key, text := splitKey(l)
			b.WriteString(".TP\n\\fB" + roffEscape(keyNames.Replace(key)) + "\\fR\n" + roffLine(text) + "\n")
		}
	}
}

// splitKey splits a help line into its key column and its text.
func splitKey(l string) (key, text string) {
	// A key's label holds single spaces ("← / h"); the padding that
	// ends it is two or more, however wide the table's column.
	if i := strings.Index(l, "  "); i >= 0 {
		return strings.TrimSpace(l[:i]), strings.TrimSpace(l[i:])
	}
	return strings.TrimSpace(l), ""
}

// capitalize is s with its first letter in capitals: a subsection's title.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	r, size := utf8.DecodeRuneInString(s)
	return strings.ToUpper(string(r)) + s[size:]
}

// paragraphs writes text's paragraphs (separated by blank lines), each
// filled by man.
func paragraphs(b *strings.Builder, text string) {
	for i, p := range strings.Split(text, "\n\n") {
		if i > 0 {
			b.WriteString(".PP\n")
		}
		b.WriteString(roffLine(strings.Join(strings.Fields(p), " ")) + "\n")
	}
}

// roffEscape escapes what roff would read as its own: backslashes and
// dashes (a minus sign, so that the options are searchable and copy as
// typed); the arrows and ellipsis of the viewer's help become words or
// ASCII, which every man device shows (groff -Tascii has no ↑), and any
// other non-ASCII letter groff's \[uXXXX].
func roffEscape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case asciiFor[r] != "":
			b.WriteString(asciiFor[r])
		default:
			fmt.Fprintf(&b, `\[u%04X]`, r)
		}
	}
	return b.String()
}

// asciiFor is what the man pages write for the non-ASCII the tables'
// text holds: arrows as ASCII art (All -> Leaks), but ↑ and ↓, which
// there are keys (↑ recalls the last search).
var asciiFor = map[rune]string{
	'→': `\->`, '←': `<\-`, '↔': `<\->`, '…': "...", '↑': "Up", '↓': "Down",
}

// keyNames names the arrow keys of the viewer's key column.
var keyNames = strings.NewReplacer("↑", "Up", "↓", "Down", "←", "Left", "→", "Right")

// roffLine is a line of text, guarded against starting with a control
// character.
func roffLine(s string) string {
	s = roffEscape(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
