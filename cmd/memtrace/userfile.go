package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/memtrace/memtrace/internal/asuser"
)

// createLog creates the -o log. Under sudo it is created as the user who
// ran sudo, so the log is theirs and the kernel applies that user's rights
// to the path: a symlink planted in a shared directory, or a directory the
// user may not write, fails as it would without sudo instead of letting
// root overwrite what it points at. It has the shape of
// preload.Options.OpenLog so the LD_PRELOAD path can use it too.
func createLog(path string) (*os.File, error) {
	f, err := asuser.Create(path)
	if err == nil {
		return f, nil
	}
	hint := "give a path in a directory you can write"
	if _, sudo, _ := asuser.Invoker(); sudo && errors.Is(err, fs.ErrPermission) {
		hint = "under sudo the log is created as the user who ran sudo: give a path that user can write"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the path is already in the message
	}
	return nil, fmt.Errorf("create log %s: %w; %s", path, err, hint)
}
