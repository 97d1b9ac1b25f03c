// Package units formats byte counts for people. Every output that people
// read (memtrace report's text and HTML, the --report-dir files and their
// summary, memview) uses it, so one figure reads the same everywhere; the
// convention is heaptrack_print's, since the report is heaptrack_print-style
// and its users compare the two. Machine-readable outputs (the log, JSON,
// massif, pprof) keep exact integers and do not use it.
package units
