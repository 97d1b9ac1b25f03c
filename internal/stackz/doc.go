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
// repeats. What it writes is standard zstd (RFC 8878): any decoder reads
// it, and logio's readers do.
//
// Only what a log needs is built: compressed blocks with Huffman literals
// (klauspost's huff0) and FSE sequence tables made per block, raw blocks
// where that does not pay, a content checksum, no dictionary.
package stackz
