package main

import (
	"context"
	"io"
	"os"

	preload "github.com/memtrace/memtrace/fallback-preload"
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
		TrackThreads: o.trackThreads,
		Stdin:        os.Stdin,
		Stdout:       os.Stdout,
		Stderr:       os.Stderr,
	}
	if o.listen != "" {
		opts.Listen = o.listen // ADDR:PORT; --port made it 127.0.0.1:PORT
	}
	return preload.Run(ctx, opts, o.argv)
}

func runReport(args []string, stderr io.Writer) int {
	return report.Main(args, os.Stdout, stderr)
}
