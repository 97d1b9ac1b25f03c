// Package asuser opens and creates files as the user behind sudo. memtrace
// needs root for BPF, but the files a user names on its command line (the
// log, the config file, the report directory) must be opened with that
// user's rights, so that the kernel's own permission and symlink rules
// (fs.protected_symlinks, fs.protected_regular, directory write
// permission) decide, and what memtrace creates belongs to that user.
//
// Only one OS thread ever holds the user's credentials: a goroutine locks
// itself to a thread, changes that thread's credentials with raw system
// calls (the syscall package's Setuid changes every thread), does the file
// operation and exits still locked, which makes the Go runtime discard the
// thread. Without sudo (not root, or no SUDO_UID) every call is the plain
// os one.
//
// Every output file memtrace creates goes through Create, CreateNew,
// WriteOutput or WriteRenamed (output.go). As root without sudo the kernel
// would follow any symbolic link for root, so these follow a final link
// only where no other user could have made or replaced it, create the
// names memtrace chooses exclusively, and remove a file whose write failed
// (docs/cli.md, "Output files").
package asuser
