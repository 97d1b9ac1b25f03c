package event

// Op is an allocation function's op: its number, carried by the eBPF
// events, the attach cookies and the preload library's records, and its
// name in the log's op column (logfmt uses this type).
type Op uint8

// The constants, their names, IsFree and SymbolOp's table are generated
// from internal/ops/table.go into op_gen.go.

func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return "?"
}

// NumOps is the number of Op values, for tables indexed by Op.
const NumOps = int(numOps)

// SymbolOp is the op a call through a PLT stub of the function name logs,
// for the functions with several names (MT_CK_ALIAS): false for a name
// memtrace does not probe. The eBPF tracer asks it which functions a
// library has, the agent what a call site's stub names.
func SymbolOp(name string) (Op, bool) {
	op, ok := symbolOps[name]
	if !ok {
		return OpOther, false
	}
	return op, true
}

// IsSymbolOpName is SymbolOp's test for a name still in a byte slice (a
// symbol table read in place), without making a string of it.
func IsSymbolOpName(name []byte) bool {
	_, ok := symbolOps[string(name)]
	return ok
}
