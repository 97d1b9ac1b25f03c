package cli

import (
	"fmt"
	"io"
	"strings"
)

// Version is stamped into every log header and printed by --version.
const Version = "0.1.0"

// PrintVersion writes "NAME VERSION".
func PrintVersion(w io.Writer, name string) {
	fmt.Fprintf(w, "%s %s\n", name, Version)
}

// helpWidth is the widest option column before the help text moves to a
// line of its own; lineWidth is where help text wraps.
const (
	helpWidth = 30
	lineWidth = 79
)

// Help writes c's --help: synopsis, description, the options by section,
// GNU style (-f, --follow LOG), and the footer.
func Help(w io.Writer, c *Command) {
	for i, s := range c.Synopsis {
		lead := "usage: "
		if i > 0 {
			lead = "       "
		}
		fmt.Fprintf(w, "%s%s\n", lead, s)
	}
	if c.Description != "" {
		fmt.Fprintf(w, "\n%s\n", wrap(c.Description, 0))
	}
	width := 0
	for _, f := range c.visible() {
		if l := len(f.left()); l <= helpWidth {
			width = max(width, l)
		}
	}
	for i, group := range c.bySection() {
		if len(group) == 0 {
			continue
		}
		title := "options"
		if i < len(c.Sections) && c.Sections[i] != "" {
			title = c.Sections[i]
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		for _, f := range group {
			text := wrap(f.helpText(), 2+width+2)
			if l := f.left(); len(l) > width {
				fmt.Fprintf(w, "  %s\n%s%s\n", l, strings.Repeat(" ", 2+width+2), text)
			} else {
				fmt.Fprintf(w, "  %-*s  %s\n", width, l, text)
			}
		}
	}
	if c.Footer != "" {
		fmt.Fprintf(w, "\n%s\n", wrap(c.Footer, 0))
	}
}

func (f *Flag) helpText() string {
	if f.Default != "" {
		return f.Help + " (default " + f.Default + ")"
	}
	return f.Help
}

// wrap fills text to lineWidth, the lines after the first indented by
// indent columns (the first is the caller's); blank lines (paragraphs) and
// lines that start with a space (examples) are kept as they are.
func wrap(text string, indent int) string {
	var out strings.Builder
	col := indent
	pad := strings.Repeat(" ", indent)
	for pi, para := range strings.Split(text, "\n\n") {
		if pi > 0 {
			out.WriteString("\n\n" + pad)
			col = indent
		}
		for li, line := range strings.Split(para, "\n") {
			if strings.HasPrefix(line, " ") {
				if li > 0 || col > indent {
					out.WriteString("\n" + pad)
				}
				out.WriteString(line)
				col = lineWidth // the next word starts a line
				continue
			}
			for _, word := range strings.Fields(line) {
				switch {
				case col == indent:
				case col+1+len(word) > lineWidth:
					out.WriteString("\n" + pad)
					col = indent
				default:
					out.WriteByte(' ')
					col++
				}
				out.WriteString(word)
				col += len(word)
			}
		}
	}
	return out.String()
}
