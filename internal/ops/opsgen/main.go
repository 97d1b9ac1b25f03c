// Command opsgen writes the files generated from internal/ops/table.go
// (`go generate ./internal/ops` runs it):
//
//	go run ./internal/ops/opsgen -root .
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/memtrace/memtrace/internal/ops"
)

func main() {
	root := flag.String("root", ".", "the module's root directory")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "opsgen:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	files, err := ops.Generate()
	if err != nil {
		return err
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if err := os.WriteFile(filepath.Join(root, p), files[p], 0o644); err != nil {
			return fmt.Errorf("write the generated file: %w", err)
		}
	}
	return nil
}
