package main

import (
	"errors"
	"io"
)

// runPreload and runReport are wired to their packages as those land.
func runPreload(o *options, stderr io.Writer) (int, error) {
	return 1, errors.New("the LD_PRELOAD fallback is not built into this memtrace")
}

func runReport(args []string, stderr io.Writer) int {
	_, _ = io.WriteString(stderr, "memtrace: report is not built into this memtrace\n")
	return 2
}
