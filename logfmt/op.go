package logfmt

// Op is an allocation-function name as it appears in the op column.
type Op uint8

// The constants, their names and IsFree and ParseOp are generated from
// internal/ops/table.go into op_gen.go.

func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return "?"
}

// NumOps is the number of Op values, for tables indexed by Op.
const NumOps = int(numOps)
