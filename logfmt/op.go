package logfmt

// Op is an allocation-function name as it appears in the op column.
type Op uint8

// The ops of SPEC §3. OpOther is a name this version does not know; readers
// keep its text (Line.OpText) and treat the line by its shape.
const (
	OpOther Op = iota
	OpMalloc
	OpCalloc
	OpRealloc
	OpReallocarray
	OpFree
	OpNew
	OpNewArr
	OpDelete
	OpDeleteArr
	OpStrdup
	OpStrndup
	OpMmap
	OpMunmap
	OpMremap
	OpPosixMemalign
	OpAlignedAlloc
	OpMemalign
	OpValloc
	OpPvalloc
	numOps
)

var opNames = [numOps]string{
	OpOther:         "?",
	OpMalloc:        "malloc",
	OpCalloc:        "calloc",
	OpRealloc:       "realloc",
	OpReallocarray:  "reallocarray",
	OpFree:          "free",
	OpNew:           "new",
	OpNewArr:        "new[]",
	OpDelete:        "delete",
	OpDeleteArr:     "delete[]",
	OpStrdup:        "strdup",
	OpStrndup:       "strndup",
	OpMmap:          "mmap",
	OpMunmap:        "munmap",
	OpMremap:        "mremap",
	OpPosixMemalign: "posix_memalign",
	OpAlignedAlloc:  "aligned_alloc",
	OpMemalign:      "memalign",
	OpValloc:        "valloc",
	OpPvalloc:       "pvalloc",
}

func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return "?"
}

// IsFree reports whether the op releases memory.
func (o Op) IsFree() bool {
	return o == OpFree || o == OpDelete || o == OpDeleteArr || o == OpMunmap
}

// NumOps is the number of Op values, for tables indexed by Op.
const NumOps = int(numOps)

// ParseOp maps an op name to its Op; unknown names give OpOther.
func ParseOp(b []byte) Op {
	// A switch on string(b) does not allocate.
	switch string(b) {
	case "malloc":
		return OpMalloc
	case "calloc":
		return OpCalloc
	case "realloc":
		return OpRealloc
	case "reallocarray":
		return OpReallocarray
	case "free":
		return OpFree
	case "new":
		return OpNew
	case "new[]":
		return OpNewArr
	case "delete":
		return OpDelete
	case "delete[]":
		return OpDeleteArr
	case "strdup":
		return OpStrdup
	case "strndup":
		return OpStrndup
	case "mmap":
		return OpMmap
	case "munmap":
		return OpMunmap
	case "mremap":
		return OpMremap
	case "posix_memalign":
		return OpPosixMemalign
	case "aligned_alloc":
		return OpAlignedAlloc
	case "memalign":
		return OpMemalign
	case "valloc":
		return OpValloc
	case "pvalloc":
		return OpPvalloc
	}
	return OpOther
}
