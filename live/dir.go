package live

import (
	"fmt"
	"io"
	"path/filepath"
	"time"
)

// WriteEvery writes a heap profile of every traced process into dir every
// interval until stop is closed: heap-<UTC time>.pb.gz, each file written
// by save, which must leave a file complete once it has its name, and none
// on a failure (asuser.WriteRenamed: under sudo as the user). Errors go to
// errf and the next interval tries again.
func (pr *Profiler) WriteEvery(dir string, interval time.Duration, save func(path string, write func(io.Writer) error) error,
	errf func(error), stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			final := filepath.Join(dir, ProfileName(now))
			if err := save(final, pr.WriteProfile); err != nil {
				errf(fmt.Errorf("--profile-dir: write %s: %w", final, err))
			}
		}
	}
}

// ProfileName is the name of the profile written at t.
func ProfileName(t time.Time) string {
	return "heap-" + t.UTC().Format("20060102T150405.000Z") + ".pb.gz"
}
