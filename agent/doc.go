// Package agent turns the tracer's decoded events into a memtrack-format log:
// it puts events in time order, keeps each process's live blocks (so that a
// free line carries the size it releases), each thread's running total and
// name, applies --min-size and --track-threads, and writes the header,
// lost-record lines and the closing summary. It writes only through logfmt.
package agent
