package live

import (
	"fmt"
	"io"
	"path/filepath"
	"time"
)

// WriteEvery writes a heap profile of every traced process into dir every
// interval until stop is closed: heap-<UTC time>.pb.gz, each file made by
// create (as the user behind sudo) and complete once it has its name
// (written under a temporary name, then renamed). Errors go to errf and
// the next interval tries again.
func (pr *Profiler) WriteEvery(dir string, interval time.Duration, create func(path string) (io.WriteCloser, error),
	rename func(from, to string) error, errf func(error), stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			if err := pr.writeFile(dir, now, create, rename); err != nil {
				errf(err)
			}
		}
	}
}

// ProfileName is the name of the profile written at t.
func ProfileName(t time.Time) string {
	return "heap-" + t.UTC().Format("20060102T150405.000Z") + ".pb.gz"
}

func (pr *Profiler) writeFile(dir string, now time.Time, create func(string) (io.WriteCloser, error), rename func(string, string) error) error {
	final := filepath.Join(dir, ProfileName(now))
	tmp := filepath.Join(dir, "."+ProfileName(now)+".tmp")
	f, err := create(tmp)
	if err != nil {
		return fmt.Errorf("--profile-dir: %w", err)
	}
	if err := pr.WriteProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("--profile-dir: write %s: %w", final, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--profile-dir: write %s: %w", final, err)
	}
	if err := rename(tmp, final); err != nil {
		return fmt.Errorf("--profile-dir: %w", err)
	}
	return nil
}
