// Package logio writes memtrace logs compressed (zstd or gzip, chosen by
// the file's suffix) and reads them back whatever their form, sniffing the
// magic bytes, streaming and in bounded memory.
//
// The compressed stream is one zstd frame (or one gzip member) in which
// blocks end (a zstd block end, a deflate sync flush) within
// FlushInterval of every Write, so that what was written can be decoded
// from the file: memview -f shows it, and a writer killed with SIGKILL
// leaves a file that reads up to its last block end and then says it was
// cut (ErrTruncated). The agent writes through a buffered writer that
// only writes at its flush points (every 100 ms, or when its buffer is
// full), so its flushes are the block ends. Decompressed, the stream is byte for byte the plain log,
// so `zstdcat FILE | memview -f -` works with memtrack's own memview.
package logio
