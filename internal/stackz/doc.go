// Package stackz writes a memtrace log as one zstd frame, told where the
// log repeats a stack's text.
//
// A log with stacks is mostly frame lines: every event carries its
// stack's text again, so a general compressor spends nearly all of its
// time finding matches the writer already knew about. The agent formats a
// stack's text once and says, with each copy it writes, which stack it
// is (a Mark); the encoder then takes the text as a match to the stack's
// last copy without searching, verified byte for byte, and spends its
// search only on the event lines between. What it writes is standard
// zstd (RFC 8878): any decoder reads it, and logio's readers do.
//
// Only what a log needs is built: compressed blocks with Huffman literals
// (klauspost's huff0) and FSE sequence tables made per block, raw blocks
// where that does not pay, a content checksum, no dictionary.
package stackz
