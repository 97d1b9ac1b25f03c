// Package unwind builds compact DWARF unwind tables for ELF files and
// walks stacks with them, so that stacks through code built without frame
// pointers (Debian's libc, libstdc++, most -O2 programs) can be unwound.
//
// # The pieces
//
//   - ParseEhFrame, ParseDebugFrame, ParseEhFrameHdr: a bounded parser of
//     call frame information (CIEs, FDEs, pointer encodings, "zR", "zPLR",
//     "S" augmentations). Malformed input returns an error wrapping
//     ErrMalformed, never a panic, and allocation is bounded by the input.
//   - BuildTable / BuildTableFile: runs every FDE's CFA program and
//     flattens the result into sorted 8-byte rows (Row, the row ABI of the
//     BPF walker; see the Row* constants and docs/unwind.md), merging
//     identical neighbours and marking PC ranges with no FDE as gaps.
//     .debug_frame fills ranges .eh_frame does not cover.
//   - Walk / WalkDetailed: the reference walker over tables, the oracle
//     the BPF walker is tested against.
//
// # Typical use
//
//	t, err := unwind.BuildTableFile("/lib/x86_64-linux-gnu/libc.so.6", nil)
//	bias, _ := t.Bias(mapStart, mapOffset) // from /proc/PID/maps
//	frames := unwind.Walk(unwind.Regs{PC: pc, SP: sp, FP: fp}, readStack,
//		[]unwind.Mapping{{Start: mapStart, End: mapEnd, Bias: bias, Table: t}}, 64)
//
// A runtime PC maps to a row as pc - bias - Table.Base (a u32). A caller
// frame is looked up at its return address minus one; the first frame and
// a frame interrupted by a signal at their PC.
//
// x86-64 and arm64, 64-bit little-endian ELF only.
package unwind
