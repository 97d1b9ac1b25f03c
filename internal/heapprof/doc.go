// Package heapprof is memtrace's one pprof encoder: `memtrace report
// --pprof`, the live /debug/pprof/heap endpoint and --profile-dir all write
// their profiles through it, so that every profile memtrace writes reads the
// same way in go tool pprof, Parca and Pyroscope.
//
// The layout is Go's heap profile's: sample types alloc_objects,
// alloc_space, inuse_objects and inuse_space (default inuse_space), period
// type space/bytes. Where a caller knows the peak (the report does), two
// more sample types follow, peak_objects and peak_space: the blocks live at
// the moment of the process's peak, by stack. They are sample types rather
// than a second profile so that one file answers both questions and the
// first four stay where Go's tools expect them.
//
// Mappings are real: the path the process mapped, its GNU build ID and the
// range and file offset of each executable segment, derived from the ELF
// program headers and the load bias that a frame's address and its
// symbol+offset give. Location addresses are the call instruction's (the
// return address minus one, as Go's runtime writes them), so that pprof's
// -addresses, and a re-symbolization from the binaries, land on the call.
// A frame in inlined code carries one pprof Line per inlined function,
// innermost first and the physical function last, each with its file:line
// from the module's DWARF.
//
// What the continuous-profiling servers key on follows Go's heap profile
// too: labels are string labels (a pid as well: Parca and Pyroscope make
// series labels of no other kind), and a snapshot carries no duration (they
// take a profile with one for a delta). heapproftest holds the writers to
// those rules. WriteText renders a profile as Go's ?debug=1 text.
package heapprof
