package logfmt

// Op is an allocation-function name as it appears in the op column.
type Op uint8

// The ops of docs/spec.md §3. OpOther is a name this version does not know;
// readers keep its text (Line.OpText) and treat the line by its shape.
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
	// The allocators' own APIs (issue 17), appended so that no earlier
	// number moves: the preload library's records use these numbers.
	OpMallocx
	OpRallocx
	OpXallocx
	OpSdallocx
	OpDallocx
	OpTcMalloc
	OpTcCalloc
	OpTcRealloc
	OpTcFree
	OpTcCfree
	OpTcMemalign
	OpTcPosixMemalign
	OpTcValloc
	OpTcPvalloc
	OpTcNew
	OpTcNewArr
	OpTcDelete
	OpTcDeleteArr
	OpMiMalloc
	OpMiCalloc
	OpMiRealloc
	OpMiFree
	OpMiStrdup
	OpMiZalloc
	OpMiMallocAligned
	OpMiZallocAligned
	OpMiCallocAligned
	OpMiReallocAligned
	numOps
)

var opNames = [numOps]string{
	OpOther:            "?",
	OpMalloc:           "malloc",
	OpCalloc:           "calloc",
	OpRealloc:          "realloc",
	OpReallocarray:     "reallocarray",
	OpFree:             "free",
	OpNew:              "new",
	OpNewArr:           "new[]",
	OpDelete:           "delete",
	OpDeleteArr:        "delete[]",
	OpStrdup:           "strdup",
	OpStrndup:          "strndup",
	OpMmap:             "mmap",
	OpMunmap:           "munmap",
	OpMremap:           "mremap",
	OpPosixMemalign:    "posix_memalign",
	OpAlignedAlloc:     "aligned_alloc",
	OpMemalign:         "memalign",
	OpValloc:           "valloc",
	OpPvalloc:          "pvalloc",
	OpMallocx:          "mallocx",
	OpRallocx:          "rallocx",
	OpXallocx:          "xallocx",
	OpSdallocx:         "sdallocx",
	OpDallocx:          "dallocx",
	OpTcMalloc:         "tc_malloc",
	OpTcCalloc:         "tc_calloc",
	OpTcRealloc:        "tc_realloc",
	OpTcFree:           "tc_free",
	OpTcCfree:          "tc_cfree",
	OpTcMemalign:       "tc_memalign",
	OpTcPosixMemalign:  "tc_posix_memalign",
	OpTcValloc:         "tc_valloc",
	OpTcPvalloc:        "tc_pvalloc",
	OpTcNew:            "tc_new",
	OpTcNewArr:         "tc_newarray",
	OpTcDelete:         "tc_delete",
	OpTcDeleteArr:      "tc_deletearray",
	OpMiMalloc:         "mi_malloc",
	OpMiCalloc:         "mi_calloc",
	OpMiRealloc:        "mi_realloc",
	OpMiFree:           "mi_free",
	OpMiStrdup:         "mi_strdup",
	OpMiZalloc:         "mi_zalloc",
	OpMiMallocAligned:  "mi_malloc_aligned",
	OpMiZallocAligned:  "mi_zalloc_aligned",
	OpMiCallocAligned:  "mi_calloc_aligned",
	OpMiReallocAligned: "mi_realloc_aligned",
}

func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return "?"
}

// IsFree reports whether the op releases memory.
func (o Op) IsFree() bool {
	switch o {
	case OpFree, OpDelete, OpDeleteArr, OpMunmap, OpSdallocx, OpDallocx,
		OpTcFree, OpTcCfree, OpTcDelete, OpTcDeleteArr, OpMiFree:
		return true
	}
	return false
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
	case "mallocx":
		return OpMallocx
	case "rallocx":
		return OpRallocx
	case "xallocx":
		return OpXallocx
	case "sdallocx":
		return OpSdallocx
	case "dallocx":
		return OpDallocx
	case "tc_malloc":
		return OpTcMalloc
	case "tc_calloc":
		return OpTcCalloc
	case "tc_realloc":
		return OpTcRealloc
	case "tc_free":
		return OpTcFree
	case "tc_cfree":
		return OpTcCfree
	case "tc_memalign":
		return OpTcMemalign
	case "tc_posix_memalign":
		return OpTcPosixMemalign
	case "tc_valloc":
		return OpTcValloc
	case "tc_pvalloc":
		return OpTcPvalloc
	case "tc_new":
		return OpTcNew
	case "tc_newarray":
		return OpTcNewArr
	case "tc_delete":
		return OpTcDelete
	case "tc_deletearray":
		return OpTcDeleteArr
	case "mi_malloc":
		return OpMiMalloc
	case "mi_calloc":
		return OpMiCalloc
	case "mi_realloc":
		return OpMiRealloc
	case "mi_free":
		return OpMiFree
	case "mi_strdup":
		return OpMiStrdup
	case "mi_zalloc":
		return OpMiZalloc
	case "mi_malloc_aligned":
		return OpMiMallocAligned
	case "mi_zalloc_aligned":
		return OpMiZallocAligned
	case "mi_calloc_aligned":
		return OpMiCallocAligned
	case "mi_realloc_aligned":
		return OpMiReallocAligned
	}
	return OpOther
}
