package launch

import "sync"

// probeCounter counts the probe sets (a library's allocation functions in
// one process) memtrace holds, for /metrics: the tracer's attach calls
// pass through it.
type probeCounter struct {
	tracerAPI
	mu    sync.Mutex
	byPID map[int]int
}

func countProbes(tr tracerAPI) *probeCounter {
	return &probeCounter{tracerAPI: tr, byPID: map[int]int{}}
}

func (c *probeCounter) AttachLibrary(pid int, path string) (bool, error) {
	ok, err := c.tracerAPI.AttachLibrary(pid, path)
	if ok && err == nil {
		c.mu.Lock()
		c.byPID[pid]++
		c.mu.Unlock()
	}
	return ok, err
}

func (c *probeCounter) ScanProcess(pid int) ([]string, error) {
	added, err := c.tracerAPI.ScanProcess(pid)
	if len(added) > 0 {
		c.mu.Lock()
		c.byPID[pid] += len(added)
		c.mu.Unlock()
	}
	return added, err
}

func (c *probeCounter) ReleaseProcess(pid int) {
	c.tracerAPI.ReleaseProcess(pid)
	c.mu.Lock()
	delete(c.byPID, pid)
	c.mu.Unlock()
}

func (c *probeCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.byPID {
		n += v
	}
	return n
}
