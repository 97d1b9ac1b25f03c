// Package symbols turns addresses in a traced process into module, symbol,
// offset and (on request) source file, line and inlined frames. It is pure
// Go: no cgo, no BPF, no terminal code.
//
// # The pieces
//
//   - Cache: parsed modules shared by every process. A module is keyed by
//     its GNU build ID, or by the (device, inode) of the mapped file when
//     it has none. Its symbol table (.symtab, .dynsym, the separate debug
//     file's .symtab, MiniDebugInfo, and synthesized "name@plt" stubs) is
//     parsed once, on first use, into an address-sorted array searched by
//     binary search. DWARF is indexed on first source lookup, one
//     compilation unit at a time.
//   - AddressSpace: the mappings of one process over time. Feed it
//     /proc/PID/maps snapshots (ReadProcMaps, AddSnapshot) and mmap events
//     (AddMapping); mappings that later vanish (dlclose, exit) are kept, and
//     a new overlapping mapping supersedes an old one only from its own time
//     on (ResolveAt). Files are opened when their mapping is added, through
//     /proc/PID/map_files or /proc/PID/root, so a process that already
//     exited still resolves.
//   - Module: one ELF file. Module.Resolve, Symbol, Source and SymbolValue
//     work on ELF virtual addresses without any process.
//   - Cache.SourceLine / SourceFrames: for a log reader that only has
//     "MODULE(SYMBOL+0xOFF)" or "MODULE(+0xOFF)".
//   - Demangle: C++ and Rust names to source form, unchanged when not
//     mangled.
//   - Call, Calls: a frame as the functions it stands for, each at its
//     call site ("Cache::put leaky.cpp:15", "f+0x24"), the one naming of
//     the HTML report and memview.
//   - ProcMapping / ProcMappings: a /proc/PID/maps line as read by
//     internal/procfs, the one maps parser, as an AddressSpace takes it.
//
// # Typical use (the tracer's agent)
//
//	cache := symbols.NewCache(nil)
//	as, err := symbols.NewAddressSpace(cache, pid) // as soon as the pid is seen
//	as.ReadProcMaps(now)                            // and AddMapping(m, ts) per mmap event
//	fr, err := as.ResolveAt(retAddr, eventTS, symbols.ReturnAddress)
//	// fr.Module, fr.Symbol (mangled), fr.Offset -> "MODULE(SYMBOL+0xOFF) [0xADDR]"
//
// # Names
//
// Symbol names are returned mangled, exactly as in the ELF symbol table,
// because that is what memtrack logs carry (glibc's backtrace_symbols
// prints them so) and what SymbolValue takes back. SourceFrame.Function
// is the DWARF linkage name (mangled) where the compiler emitted one.
// Readers call Demangle for display.
//
// # Errors
//
// Errors wrap the sentinels ErrNotELF, ErrMalformed, ErrNoSymbols,
// ErrNoDebugInfo, ErrNotFound, ErrTooLarge and ErrBadMaps. Malformed ELF or
// DWARF never panics out of this package: reads are bounded by the file
// size and Limits, and panics inside debug/elf or debug/dwarf are turned
// into ErrMalformed. See docs/symbols.md for the debug file search order
// and the limits.
package symbols
