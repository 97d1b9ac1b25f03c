//go:build arm64

package preload

import "embed"

// libFS holds the library for this architecture once make has built it;
// the placeholder keeps the pattern matching on a fresh clone.
//
//go:embed lib/memtrace-preload-arm64.so*
var libFS embed.FS
