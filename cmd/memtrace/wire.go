package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/memtrace/memtrace/internal/asuser"
	"github.com/memtrace/memtrace/procreport"
	"github.com/memtrace/memtrace/report"
)

func runReport(args []string, stderr io.Writer) int {
	for i, a := range args {
		if a == "--aggregate" || a == "-aggregate" {
			return runAggregate(append(args[:i:i], args[i+1:]...), os.Stdout, stderr)
		}
	}
	return report.Main(args, os.Stdout, stderr)
}

// runAggregate is `memtrace report --aggregate DIR [--output-prefix P]`:
// mem_monitor's aggregator over the per-process reports --report-dir
// wrote. It writes DIR/P.txt and DIR/P.html and prints the text.
func runAggregate(args []string, stdout, stderr io.Writer) int {
	prefix := "memtrace_summary"
	var dir string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case (a == "--output-prefix" || a == "-output-prefix") && i+1 < len(args):
			prefix = args[i+1]
			i++
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(stderr, "memtrace: report --aggregate: unknown flag %s (give DIR and optionally --output-prefix P)\n", a)
			return 2
		case dir == "":
			dir = a
		default:
			fmt.Fprintf(stderr, "memtrace: report --aggregate takes one directory, got %s and %s\n", dir, a)
			return 2
		}
	}
	if dir == "" {
		fmt.Fprintln(stderr, "memtrace: report --aggregate: give the directory --report-dir wrote")
		return 2
	}
	_, skipped, err := procreport.Aggregate(dir, prefix)
	if err != nil {
		fmt.Fprintf(stderr, "memtrace: %v\n", err)
		return 1
	}
	if len(skipped) > 0 {
		fmt.Fprintf(stderr, "memtrace: skipped %d files that are not process reports or may not be read: %s\n", len(skipped), strings.Join(skipped, ", "))
	}
	// As the user: read back as root, a summary swapped for a symlink
	// since Aggregate wrote it would print any file.
	b, err := asuser.ReadFile(filepath.Join(dir, prefix+".txt"))
	if err != nil {
		fmt.Fprintf(stderr, "memtrace: %v\n", err)
		return 1
	}
	stdout.Write(b)
	return 0
}
