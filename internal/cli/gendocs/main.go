// Command gendocs writes the man pages (docs/man/*.1) and the bash, zsh
// and fish completions (completions/) from internal/cli's command tables
// and memview's key table (viewer.HelpLines, the help overlay's text):
// go generate ./internal/cli, from the repository's root or not.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/memtrace/memtrace/internal/cli"
	"github.com/memtrace/memtrace/viewer"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	for path, text := range cli.Generated(viewer.HelpLines()) {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			fmt.Fprintf(os.Stderr, "gendocs: %v\n", err)
			os.Exit(1)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "gendocs: %v\n", err)
			os.Exit(1)
		}
	}
}
