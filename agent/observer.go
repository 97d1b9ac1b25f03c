package agent

// Observer is told what the log says, in log order: blocks allocated and
// freed (after the session's filters), the frames of each stack the first
// time it is met (resolved once, as the log's frame lines are), forks (the
// child's heap starts as a copy of its parent's), execs (a new, empty
// heap), process exits and records the capture lost. The agent defines it
// so that it depends on no consumer: the runner hands it the live model of
// --http and --profile-dir (runner/live.go adapts it).
type Observer interface {
	Alloc(pid uint32, ptr, size, stack, ts uint64)
	Free(pid uint32, ptr, ts uint64)
	// Stack's frames are the session's: an observer that keeps them
	// copies them.
	Stack(id uint64, frames []Frame)
	Fork(parent, child uint32)
	Exec(pid uint32)
	ProcessExit(pid uint32)
	Lost(n uint64)
}
