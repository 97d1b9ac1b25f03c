package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/memtrace/memtrace/unwind"
)

func main() {
	rows := flag.Bool("rows", false, "print every row")
	at := flag.String("at", "", "print the rule at this ELF virtual address")
	noDebug := flag.Bool("no-debug-frame", false, "ignore .debug_frame")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: unwind-dump [-rows] [-at ADDR] FILE...")
		os.Exit(2)
	}
	status := 0
	for _, path := range flag.Args() {
		start := time.Now()
		t, err := unwind.BuildTableFile(path, &unwind.Options{NoDebugFrame: *noDebug})
		if err != nil {
			fmt.Fprintf(os.Stderr, "unwind-dump: %v\n", err)
			status = 1
			continue
		}
		elapsed := time.Since(start)
		s := t.Stats
		fmt.Printf("%s: %s, base %#x, %d rows, %d bytes, built in %v\n", path, t.Arch, t.Base, s.Rows, s.Bytes, elapsed.Round(time.Microsecond))
		fmt.Printf("  FDEs: %d .eh_frame, %d .debug_frame (%d duplicates dropped), %d outside text, %d overlapping, %d skipped, %d bad programs, %d synthetic PLT\n",
			s.EhFrameFDEs, s.DebugFrameFDEs, s.DebugFrameDup, s.OutsideText, s.Overlapping, s.Skipped, s.BadPrograms, s.SyntheticPLT)
		fmt.Printf("  rows by CFA type:")
		for ty, n := range s.RowsByType {
			if n > 0 {
				fmt.Printf(" %s=%d", unwind.CFAType(ty), n)
			}
		}
		fmt.Printf("; signal=%d; %d extended rules\n", s.SignalRows, s.Extended)
		for _, p := range s.Problems {
			fmt.Printf("  problem: %s\n", p)
		}
		if *at != "" {
			a, err := strconv.ParseUint(*at, 0, 64)
			if err != nil {
				fmt.Fprintf(os.Stderr, "unwind-dump: -at %q is not an address\n", *at)
				os.Exit(2)
			}
			fmt.Printf("  %#x: %+v\n", a, t.Lookup(a))
		}
		if *rows {
			for _, r := range t.Rows {
				fmt.Printf("  %#x %+v\n", t.Base+uint64(r.PC), t.RowRule(r))
			}
		}
	}
	os.Exit(status)
}
