// Package ringread reads a BPF ring buffer map in batches, without
// copying records: the reader both tracers (memtrace's allocation events,
// fdtrace's descriptor events) use.
package ringread
