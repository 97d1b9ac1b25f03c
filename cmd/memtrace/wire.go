package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/memtrace/memtrace/internal/asuser"
	"github.com/memtrace/memtrace/internal/cli"
	"github.com/memtrace/memtrace/procreport"
	"github.com/memtrace/memtrace/report"
)

func runReport(args []string, stderr io.Writer) int {
	for _, a := range args {
		if a == "--" {
			break
		}
		if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); strings.HasPrefix(a, "-") && name == "aggregate" {
			return runAggregate(args, os.Stdout, stderr)
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
	fs := cli.NewParser(cli.Report)
	fs.String(&dir, "aggregate")
	fs.String(&prefix, "output-prefix")
	fs.BindRest()
	rest, err := fs.Parse(args)
	if err == nil {
		fs.Visit(func(name, _ string) {
			if err == nil && name != "aggregate" && name != "output-prefix" {
				err = cli.UsageError{Msg: fmt.Sprintf("--aggregate takes --output-prefix P, not --%s (see memtrace report --help)", name)}
			}
		})
	}
	switch {
	case errors.Is(err, cli.ErrHelp):
		cli.Help(stdout, cli.Report)
		return 0
	case errors.Is(err, cli.ErrVersion):
		cli.PrintVersion(stdout, "memtrace report")
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "memtrace report: %v\n", err)
		return 2
	case len(rest) > 0:
		fmt.Fprintf(stderr, "memtrace report: --aggregate %s takes no log, got %s\n", dir, rest[0])
		return 2
	case dir == "":
		fmt.Fprintln(stderr, "memtrace report: --aggregate: give the directory --report-dir wrote")
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
