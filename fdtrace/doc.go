// Package fdtrace traces file descriptors, dma-heap buffers and ION buffers
// in eBPF: the raw sys_enter / sys_exit tracepoints see every syscall that
// creates or closes a descriptor and the allocation ioctls, for the
// processes added with AddProcess, and send one record per successful call
// through their own ring buffer.
//
// A Table, fed with the records in time order, knows which descriptors
// each process holds and which buffers they keep alive: it expands
// close_range, turns the last close of a buffer into a release, and answers
// the "open at exit" question for leak reports. Event.Record gives what it
// emits as the fields of [memtrace] fd / dmabuf / ion lines, which
// logfmt.AppendFD writes (see docs/fd.md).
package fdtrace
