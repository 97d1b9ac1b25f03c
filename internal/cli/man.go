package cli

import (
	"fmt"
	"strings"
)

// Man is c's man page in roff (man(7)): NAME, SYNOPSIS, DESCRIPTION, the
// options by section, SEE ALSO. It carries no date, so that it is the
// same on every run of the generator.
func Man(c *Command) string {
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
	for i, group := range c.bySection() {
		if len(group) == 0 {
			continue
		}
		title := "OPTIONS"
		if i < len(c.Sections) && c.Sections[i] != "" {
			title = strings.ToUpper(c.Sections[i])
			if j := strings.Index(title, " ("); j > 0 {
				title = title[:j]
			}
		}
		fmt.Fprintf(&b, ".SH %s\n", roffEscape(title))
		if i < len(c.Sections) {
			if _, note, ok := strings.Cut(c.Sections[i], " ("); ok {
				b.WriteString(roffLine(strings.TrimSuffix(note, ")")+".") + "\n")
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
	if c.Footer != "" {
		b.WriteString(".SH NOTES\n" + roffLine(c.Footer) + "\n")
	}
	if len(c.SeeAlso) > 0 {
		b.WriteString(".SH SEE ALSO\n")
		var refs []string
		for _, s := range c.SeeAlso {
			name, sec, _ := strings.Cut(strings.TrimSuffix(s, ")"), "(")
			refs = append(refs, "\\fB"+roffEscape(name)+"\\fR("+sec+")")
		}
		b.WriteString(strings.Join(refs, ", ") + "\n")
	}
	return b.String()
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
// typed).
func roffEscape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	return strings.ReplaceAll(s, "-", `\-`)
}

// roffLine is a line of text, guarded against starting with a control
// character.
func roffLine(s string) string {
	s = roffEscape(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
