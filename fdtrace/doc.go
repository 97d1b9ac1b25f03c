// Package fdtrace traces file descriptors, dma-heap buffers and ION buffers
// in eBPF: the raw sys_enter / sys_exit tracepoints see every syscall that
// creates or closes a descriptor and the allocation ioctls, for the
// processes added with AddProcess, and send one record per successful call
// through their own ring buffer. Read decodes them into fdevent.Event
// values, the descriptor events of the event vocabulary; what follows the
// descriptors (fdevent.Table) and writes their lines (the agent) is not
// here, and this package knows nothing of the log format.
package fdtrace
