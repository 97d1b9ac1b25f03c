// Package sizehist is the one definition of the allocation-size histogram
// that every view shows (memview's `H`, and the report's chart when it
// adopts it): buckets bounded by powers of four of the 1024-based units,
// 16 B, 64 B, 256 B, 1 KiB, 4 KiB … 1 GiB, and one bucket above, each
// labelled in those units ("≤1 KiB"), so that a label names its bound
// exactly.
package sizehist
