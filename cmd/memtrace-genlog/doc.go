// Command memtrace-genlog writes a synthetic memtrace log for benchmarks and
// tests of memview and the report: N events over T threads, a fraction of
// them with stack frames, a fraction of allocations never freed, addresses
// reused as a real allocator would. It writes through logfmt, so the output
// is exactly what memtrace writes.
//
//	memtrace-genlog -events 4000000 -threads 8 -o big.log
//	memtrace-genlog -memtrack -o mt.log     # memtrack-style: per-thread buffered, frees without size=
//	memtrace-genlog -rate 0 -follow -o live.log   # append as fast as possible (follow-mode bench)
//	memtrace-genlog -events 1000000 -stack-frac 1 -stacks 1000000 -stacks-in-turn -depth 3 -frames 1000000 -o stacks.log   # a million distinct stacks
package main
