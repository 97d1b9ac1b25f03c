package analysis

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// prefault makes the memory of s[from:to] (within its capacity) resident
// before it is written: one madvise(MADV_POPULATE_WRITE) instead of a page
// fault per page. A fault is a trap per page; where the kernel runs under
// a hypervisor that makes each one cost tens of microseconds, the faults
// of the model's fresh columns were a third of a large log's read. The
// memory is only made resident, its contents untouched, and only whole
// pages inside the range are asked for. Kernels before 5.14 refuse the
// advice: the pages then fault as before.
func prefault[T any](s []T, from, to int) {
	to = min(to, cap(s))
	if from >= to {
		return
	}
	var z T
	sz := uintptr(unsafe.Sizeof(z))
	base := uintptr(unsafe.Pointer(unsafe.SliceData(s[:cap(s)])))
	lo := (base + uintptr(from)*sz + pageSize - 1) &^ (pageSize - 1)
	hi := (base + uintptr(to)*sz) &^ (pageSize - 1)
	if hi <= lo || hi-lo < prefaultMin {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(s[:cap(s)])), lo-base)), hi-lo)
	_ = unix.Madvise(b, unix.MADV_POPULATE_WRITE)
}

// pageSize is the kernel's: madvise refuses a start not aligned to it.
var pageSize = uintptr(unix.Getpagesize())

// prefaultMin is the least memory worth a system call.
const prefaultMin = 64 << 10

// hugeMin is the least column that adviseHuge asks huge pages for.
const hugeMin = 4 << 20

// adviseHuge asks for transparent huge pages over the whole capacity of a
// large column (madvise MADV_HUGEPAGE), where the kernel leaves them to
// the program's advice.
func adviseHuge[T any](s []T) {
	var z T
	n := uintptr(cap(s)) * unsafe.Sizeof(z)
	if n < hugeMin {
		return
	}
	const huge = 2 << 20
	base := uintptr(unsafe.Pointer(unsafe.SliceData(s[:cap(s)])))
	lo := (base + huge - 1) &^ (huge - 1)
	hi := (base + n) &^ (huge - 1)
	if hi <= lo {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(s[:cap(s)])), lo-base)), hi-lo)
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
}

// release hands the memory of s (whole pages inside it) back to the
// kernel, reporting whether it did: s must not be used again.
func release[T any](s []T) bool {
	var z T
	n := uintptr(len(s)) * unsafe.Sizeof(z)
	if n < prefaultMin {
		return false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	lo := (base + pageSize - 1) &^ (pageSize - 1)
	hi := (base + n) &^ (pageSize - 1)
	b := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(s)), lo-base)), hi-lo)
	return unix.Madvise(b, unix.MADV_DONTNEED) == nil
}
