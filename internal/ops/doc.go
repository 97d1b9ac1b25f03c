// Package ops is the one table of the allocation functions memtrace
// traces (table.go): each op's number, its text in the log's op column,
// its family, and each function's symbol, signature class and probe, and
// the C signature of the LD_PRELOAD hooks that are generated. Everything
// else that lists ops is generated from it by `go generate
// ./internal/ops` (opsgen): bpf/mt_ops.h (enum mt_op),
// fallback-preload/c/mt_ops.h (the library's op list and simple hooks),
// event/op_gen.go (event.Op, which logfmt.Op is, and SymbolOp's table),
// logfmt/op_gen.go (the ops' logfmt names and ParseOp) and
// tracer/funcs_gen.go (the probe lists). TestGeneratedFilesCurrent fails when one of them is stale;
// docs/development.md, "Adding an allocation function", is the checklist.
package ops

//go:generate go run ./opsgen -root ../..
