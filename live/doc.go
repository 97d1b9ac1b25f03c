// Package live is memtrace's live heap model and its HTTP endpoint: what
// `memtrace --http ADDR` serves and `--profile-dir` writes while tracing.
//
// The model (Model) keeps, per traced process, only the blocks live now
// and per-stack totals (allocations, bytes, live blocks and bytes), never
// events: its memory grows with live blocks and distinct stacks, not with
// time. The agent feeds it through its Observer interface (the runner adapts
// the model to it: runner.LiveObserver), in the agent's
// time order and after its filters (--min-size, --track, --track-threads),
// so that the endpoint and the log agree on what is live.
//
// The server answers GET (and HEAD) only, and has no endpoint that writes
// or controls anything: /debug/pprof/heap (a gzipped pprof profile in Go's
// heap-profile layout, written by internal/heapprof; ?pid=N for one
// process, ?seconds=N for what was allocated during the next N seconds and
// is still live at their end, the only profile with a duration, since Parca
// and Pyroscope read any profile with one as a delta; ?debug=1 for Go's
// legacy text heap format), /metrics (Prometheus text format) and an index
// page. It listens on loopback unless another address is named.
// Its connections are capped, timed out when idle, and kept off the file
// descriptors the tracer needs (Limits): a client can slow the endpoint,
// never the tracing.
package live
