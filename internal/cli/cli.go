package cli

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Version is stamped into every log header and printed by --version.
const Version = "0.1.0"

// PrintVersion writes "NAME VERSION".
func PrintVersion(w io.Writer, name string) {
	fmt.Fprintf(w, "%s %s\n", name, Version)
}

// aliasPrefix marks a flag that is another's short form: its usage is
// "short for --NAME".
const aliasPrefix = "short for --"

// Usage writes fs's options, one per line, as the user types them: a
// single-letter flag as -x, any other as --name, a flag whose usage is
// "short for --NAME" folded into NAME's line ("-f, --follow"). A value
// placeholder is the usage's first `quoted` word, as the flag package has
// it.
func Usage(w io.Writer, fs *flag.FlagSet) {
	aliases := map[string]string{} // long name -> short name
	fs.VisitAll(func(f *flag.Flag) {
		if long, ok := strings.CutPrefix(f.Usage, aliasPrefix); ok {
			aliases[long] = f.Name
		}
	})
	type row struct{ left, usage string }
	var rows []row
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, aliasPrefix) {
			return
		}
		placeholder, usage := flag.UnquoteUsage(f)
		if isBool(f) {
			placeholder = ""
		}
		left := dash(f.Name)
		if s, ok := aliases[f.Name]; ok {
			left = dash(s) + ", " + left
		}
		if placeholder != "" {
			left += " " + placeholder
		}
		if d := f.DefValue; d != "" && d != "0" && d != "0s" && d != "false" && !isBool(f) {
			usage += fmt.Sprintf(" (default %s)", d)
		}
		width = max(width, len(left))
		rows = append(rows, row{left, usage})
	})
	sort.SliceStable(rows, func(i, j int) bool {
		return strings.TrimLeft(rows[i].left, "-") < strings.TrimLeft(rows[j].left, "-")
	})
	for _, r := range rows {
		fmt.Fprintf(w, "  %-*s  %s\n", width, r.left, r.usage)
	}
}

func dash(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
