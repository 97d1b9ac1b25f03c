package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	preload "github.com/memtrace/memtrace/fallback-preload"
	"github.com/memtrace/memtrace/internal/asuser"
	"github.com/memtrace/memtrace/launch"
	"github.com/memtrace/memtrace/procreport"
	"github.com/memtrace/memtrace/report"
)

// runPreload runs PROG under the bundled LD_PRELOAD library with memtrace's
// own options.
func runPreload(o *options, stderr io.Writer) (int, error) {
	// preload.Run forwards signals to the program itself and finishes
	// the log after it exits; a cancelled context would kill it.
	ctx := context.Background()
	opts := preload.Options{
		Output:       o.output,
		MinSize:      o.minSize,
		StackDepth:   o.stackDepth,
		StackThreads: o.stackThreads,
		NoFreeStacks: o.noFreeStacks,
		TrackThreads: o.trackThreads,
		Interval:     o.interval,
		ReportDir:    o.reportDir,
		PeakTopN:     o.peakTopN,
		Stdin:        os.Stdin,
		Stdout:       os.Stdout,
		Stderr:       os.Stderr,
		// Under sudo the log is created as the user behind it.
		OpenLog: launch.CreateLog,
	}
	if o.listen != "" {
		opts.Listen = o.listen // ADDR:PORT; --port made it 127.0.0.1:PORT
	}
	if o.verbose && o.stackDepth > 0 {
		opts.OnStacks = func(s preload.StackStats) {
			fmt.Fprintf(stderr, "memtrace: preload stacks: %d over unwind rows, %d by backtrace(); %d files, %d tables (%d bytes)\n",
				s.Rows, s.Backtrace, s.Files, s.Tables, s.TableBytes)
		}
	}
	// Under sudo the program runs as the user behind it, exactly as in
	// eBPF mode (the shim's dropTo): never as root.
	if cred, ok, err := launch.SudoCredential(); err != nil {
		return 1, err
	} else if ok {
		if u, ok, err := asuser.Invoker(); err == nil && ok {
			opts.BaseEnv = asuser.Env(os.Environ(), u)
		}
		uid, gid, groups, err := launch.ParseCred(cred)
		if err != nil {
			return 1, err
		}
		opts.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: toUint32(groups)}
	}
	return preload.Run(ctx, opts, o.argv)
}

func toUint32(v []int) []uint32 {
	out := make([]uint32, len(v))
	for i, n := range v {
		out[i] = uint32(n)
	}
	return out
}

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
