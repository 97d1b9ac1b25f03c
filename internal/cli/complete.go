package cli

import (
	"fmt"
	"strings"
)

const generated = "generated from internal/cli/commands.go by internal/cli/gendocs; do not edit"

// short is a flag's help cut to its first clause, for the one-line
// descriptions of zsh and fish.
func short(f *Flag) string {
	s := f.Help
	for _, sep := range []string{"; ", " (", ": "} {
		if i := strings.Index(s, sep); i > 0 {
			s = s[:i]
		}
	}
	return s
}

// funcName is a shell function name for a command: memtrace report ->
// _memtrace_report.
func funcName(c *Command) string { return "_" + strings.ReplaceAll(c.Name, " ", "_") }

// subName is the word that selects sub under its parent: report.
func subName(sub *Command) string { return sub.Name[strings.LastIndexByte(sub.Name, ' ')+1:] }

// Bash is the bash completion of c, with sub (if not nil) as its
// subcommand.
func Bash(c, sub *Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# bash completion for %s: %s.\n", c.Name, generated)
	if sub != nil {
		bashFunc(&b, sub, nil)
	}
	bashFunc(&b, c, sub)
	fmt.Fprintf(&b, "complete -o bashdefault -o default -F %s %s\n", funcName(c), c.Name)
	return b.String()
}

func bashFunc(b *strings.Builder, c, sub *Command) {
	fmt.Fprintf(b, "%s() {\n", funcName(c))
	b.WriteString("\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} i\n")
	if c.Operand == "command" {
		b.WriteString("\tfor ((i = 1; i < COMP_CWORD; i++)); do\n")
		b.WriteString("\t\tif [[ ${COMP_WORDS[i]} == -- ]]; then\n")
		b.WriteString("\t\t\t((i == COMP_CWORD - 1)) && COMPREPLY=($(compgen -c -- \"$cur\"))\n")
		b.WriteString("\t\t\treturn\n\t\tfi\n\tdone\n")
	}
	if sub != nil {
		fmt.Fprintf(b, "\tif ((COMP_CWORD > 1)) && [[ ${COMP_WORDS[1]} == %s ]]; then\n\t\t%s\n\t\treturn\n\tfi\n", subName(sub), funcName(sub))
	}
	b.WriteString("\tcase $prev in\n")
	for _, f := range c.visible() {
		if f.Arg == "" || f.OptionalArg {
			continue
		}
		var pats []string
		for _, n := range f.Names {
			pats = append(pats, "-"+n, "--"+n)
		}
		fmt.Fprintf(b, "\t%s)\n\t\t%s\n\t\treturn\n\t\t;;\n", strings.Join(pats, " | "), bashValue(f.Complete))
	}
	b.WriteString("\tesac\n")
	var opts []string
	for _, f := range c.visible() {
		opts = append(opts, f.Spellings()...)
	}
	fmt.Fprintf(b, "\tif [[ $cur == -* ]]; then\n\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n\t\treturn\n\tfi\n", strings.Join(opts, " "))
	switch {
	case sub != nil && c.Operand == "command":
		fmt.Fprintf(b, "\tif ((COMP_CWORD == 1)); then\n\t\tCOMPREPLY=($(compgen -W %s -- \"$cur\") $(compgen -c -- \"$cur\"))\n\tfi\n", subName(sub))
	case c.Operand == "command":
		b.WriteString("\tCOMPREPLY=($(compgen -c -- \"$cur\"))\n")
	}
	b.WriteString("}\n")
}

// bashValue completes a flag's value; files are left to -o default.
func bashValue(what string) string {
	switch what {
	case "file", "":
		return ":"
	case "dir":
		return `COMPREPLY=($(compgen -d -- "$cur"))`
	case "pid":
		return `COMPREPLY=($(compgen -W "$(ps -eo pid= 2>/dev/null)" -- "$cur"))`
	case "command":
		return `COMPREPLY=($(compgen -c -- "$cur"))`
	}
	return fmt.Sprintf("COMPREPLY=($(compgen -W %q -- \"$cur\"))", what)
}

// Zsh is the zsh completion (a _NAME autoload file) of c, with sub as
// its subcommand.
func Zsh(c, sub *Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#compdef %s\n# zsh completion for %s: %s.\n\n", c.Name, c.Name, generated)
	if sub != nil {
		zshFunc(&b, sub, nil)
	}
	zshFunc(&b, c, sub)
	fmt.Fprintf(&b, "%s \"$@\"\n", funcName(c))
	return b.String()
}

func zshFunc(b *strings.Builder, c, sub *Command) {
	fmt.Fprintf(b, "%s() {\n", funcName(c))
	if sub != nil {
		fmt.Fprintf(b, "\tif ((CURRENT > 2)) && [[ $words[2] == %s ]]; then\n\t\tshift words\n\t\t((CURRENT--))\n\t\t%s\n\t\treturn\n\tfi\n", subName(sub), funcName(sub))
	}
	b.WriteString("\t_arguments -S")
	for _, f := range c.visible() {
		excl := "(" + strings.Join(f.Spellings(), " ") + ")"
		if f.Repeatable {
			excl = "*"
		}
		desc := strings.NewReplacer("[", `\[`, "]", `\]`, "'", `'\''`).Replace(short(f))
		for _, s := range f.Spellings() {
			spec := s
			if f.Arg != "" && !f.OptionalArg {
				if len(s) > 2 {
					spec += "="
				}
				spec += "[" + desc + "]:" + strings.ReplaceAll(f.Arg, ":", `\:`) + ":" + zshValue(f.Complete)
			} else {
				spec += "[" + desc + "]"
			}
			fmt.Fprintf(b, " \\\n\t\t'%s%s'", excl, spec)
		}
	}
	switch c.Operand {
	case "command":
		b.WriteString(" \\\n\t\t'*:: :_normal'")
	case "file":
		b.WriteString(" \\\n\t\t'*:log:_files'")
	}
	b.WriteString("\n}\n\n")
}

func zshValue(what string) string {
	switch what {
	case "":
		return " "
	case "file":
		return "_files"
	case "dir":
		return "_files -/"
	case "pid":
		return "_pids"
	case "command":
		return "_command_names -e"
	}
	return "(" + what + ")"
}

// Fish is the fish completion of c, with sub as its subcommand.
func Fish(c, sub *Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# fish completion for %s: %s.\n", c.Name, generated)
	cond := ""
	if sub != nil {
		s := subName(sub)
		fmt.Fprintf(&b, "complete -c %s -n __fish_use_subcommand -f -a %s -d %s\n", c.Name, s, fishQuote(sub.Summary))
		cond = fmt.Sprintf(" -n 'not __fish_seen_subcommand_from %s'", s)
		fishFlags(&b, c.Name, fmt.Sprintf(" -n '__fish_seen_subcommand_from %s'", s), sub)
	}
	fishFlags(&b, c.Name, cond, c)
	return b.String()
}

func fishFlags(b *strings.Builder, name, cond string, c *Command) {
	for _, f := range c.visible() {
		fmt.Fprintf(b, "complete -c %s%s", name, cond)
		for _, n := range f.Names {
			if len(n) == 1 {
				fmt.Fprintf(b, " -s %s", n)
			} else {
				fmt.Fprintf(b, " -l %s", n)
			}
		}
		if f.Arg != "" && !f.OptionalArg {
			switch f.Complete {
			case "file":
				b.WriteString(" -r -F")
			case "dir":
				b.WriteString(" -x -a '(__fish_complete_directories)'")
			case "pid":
				b.WriteString(" -x -a '(__fish_complete_pids)'")
			case "":
				b.WriteString(" -x")
			default:
				fmt.Fprintf(b, " -x -a %s", fishQuote(f.Complete))
			}
		}
		fmt.Fprintf(b, " -d %s\n", fishQuote(short(f)))
	}
}

func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}
