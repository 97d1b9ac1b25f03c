// Package stackz writes a memtrace log as one zstd frame, told where the
// log repeats a stack's text.
//
// A log with stacks is mostly frame lines: every event carries its
// stack's text again, so a general compressor spends most of its time
// finding matches the writer already knew about. The agent formats a
// stack's text once and marks each copy it writes (a Mark: where, which
// stack, and the slice the text came from). The encoder takes a copy as a
// match to an earlier copy of that stack without searching: without even
// reading it when it came from the same slice as that copy (the agent
// never changes a text once formatted), compared byte for byte otherwise.
// It searches only the event lines between, repeat offsets first: a
// program's loop repeats its events, so the best match of a line is most
// often the same line one period back, at an offset already in the
// repeats; from inside a number it does not search at all. A writer that
// has the texts apart hands them over as such (WriteSparse): the encoder
// copies each into its history, the one copy the text then gets. Once the
// traced program is gone (Concurrent), a back end on a goroutine of its
// own hashes, codes and writes each block the parse hands it. What it writes is standard zstd (RFC 8878): any decoder reads
// it, and logio's readers do.
//
// Only what a log needs is built: compressed blocks with Huffman literals
// (klauspost's huff0, a table kept from block to block while it can code
// them) and FSE sequence tables made per block, raw blocks where that does
// not pay, a content checksum, no dictionary.
//
// What an event costs is mostly cache misses: the searches read old event
// lines a window back, so the hash table is small and its candidate is
// read before the repeat offsets are compared, and the history is a few
// windows, not more. A copy given as the same slice is still copied into
// the history, though nothing reads it there: leaving it out (holes the
// comparisons stop at) cost as much in bookkeeping as the copy.
package stackz
