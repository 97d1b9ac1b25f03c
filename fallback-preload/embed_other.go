//go:build !amd64 && !arm64 && !arm

package preload

import "embed"

// libFS is empty where no library is built: Library falls back to a file
// beside the executable.
var libFS embed.FS
