package viewer

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gdamore/tcell/v2"
)

// Every rune key of the table is documented in docs/memview.md.
func TestDocsListEveryKey(t *testing.T) {
	doc, err := os.ReadFile("../docs/memview.md")
	if err != nil {
		t.Fatalf("docs/memview.md: %v", err)
	}
	for _, b := range append(slices.Clone(Keys), ViewKeys...) {
		for _, k := range b.keys {
			if k.k != tcell.KeyRune || k.r == ' ' {
				continue
			}
			if !strings.Contains(string(doc), "`"+string(k.r)+"`") {
				t.Errorf("docs/memview.md does not document key %q (%s)", k.r, b.help)
			}
		}
	}
}
