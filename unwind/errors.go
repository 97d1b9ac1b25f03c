package unwind

import "errors"

// Sentinel errors. Every error this package returns wraps one of them (or
// an *fs.PathError from opening a file), so callers branch with errors.Is.
var (
	// ErrNotELF: the file is not an ELF object.
	ErrNotELF = errors.New("not an ELF file")
	// ErrMalformed: the ELF headers or the CFI are inconsistent (lengths
	// past the end, unknown encodings, bad CIE references), or the
	// standard library panicked on them.
	ErrMalformed = errors.New("malformed ELF or CFI data")
	// ErrUnsupportedArch: not a 64-bit little-endian x86-64 or arm64 file.
	ErrUnsupportedArch = errors.New("unsupported architecture")
	// ErrNoCFI: the file has neither .eh_frame nor .debug_frame (nor a
	// PT_GNU_EH_FRAME segment), or no FDE covers its executable segments.
	ErrNoCFI = errors.New("no call frame information")
	// ErrTooLarge: a section, or the table built from it, exceeds a Limits bound.
	ErrTooLarge = errors.New("unwind data too large")
)
