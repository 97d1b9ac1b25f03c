package logfmt

import "github.com/memtrace/memtrace/event"

// Op is an allocation-function name as it appears in the op column: the
// event package's, which the captures produce without this package.
type Op = event.Op

// The constants and ParseOp are generated from internal/ops/table.go into
// op_gen.go.

// NumOps is the number of Op values, for tables indexed by Op.
const NumOps = event.NumOps
