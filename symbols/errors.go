package symbols

import (
	"errors"

	"github.com/memtrace/memtrace/internal/procfs"
)

// Sentinel errors. Every error returned by this package wraps one of these
// (or an *os.PathError / *fs.PathError from opening a file), so callers can
// branch with errors.Is without parsing messages.
var (
	// ErrNotELF: the file is not an ELF object (wrong magic, or unreadable header).
	ErrNotELF = errors.New("not an ELF file")
	// ErrMalformed: the ELF or DWARF data is inconsistent (sizes past the end
	// of the file, bad tables, or the standard library panicked on it).
	ErrMalformed = errors.New("malformed ELF or DWARF data")
	// ErrNoSymbols: the module and its debug files carry no function symbols.
	ErrNoSymbols = errors.New("no symbols")
	// ErrNoDebugInfo: neither the module nor a debug file found for it has
	// DWARF line information.
	ErrNoDebugInfo = errors.New("no DWARF debug info")
	// ErrNotFound: the address (or symbol name) is not covered by any mapping,
	// symbol or line-table row.
	ErrNotFound = errors.New("not found")
	// ErrTooLarge: a section or decompressed payload exceeds the configured
	// limit, so it was not read.
	ErrTooLarge = errors.New("section too large")
	// ErrBadMaps: a /proc/PID/maps line could not be parsed (the
	// sentinel of internal/procfs, which parses them).
	ErrBadMaps = procfs.ErrBadMaps
)
