package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/memtrace/memtrace/fallback-preload/internal/mtabi"
)

func main() {
	out := flag.String("o", "", "the Go file to write (default: stdout)")
	pkg := flag.String("pkg", "preload", "the Go package")
	flag.Parse()
	if err := run(*out, *pkg, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "mtabigen:", err)
		os.Exit(1)
	}
}

func run(out, pkg string, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("want one header (c/mt_abi.h); usage: mtabigen [-o FILE] HEADER")
	}
	f, err := os.Open(args[0])
	if err != nil {
		return fmt.Errorf("open the header: %w", err)
	}
	src, err := io.ReadAll(io.LimitReader(f, mtabi.MaxHeader+1))
	f.Close()
	if err != nil {
		return fmt.Errorf("read %s: %w", args[0], err)
	}
	h, err := mtabi.Parse(src)
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	code, err := h.Generate(pkg, args[0], mtabi.PreloadNames)
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	if out == "" {
		_, err = os.Stdout.Write(code)
		return err
	}
	if err := os.WriteFile(out, code, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}
