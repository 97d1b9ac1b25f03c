package analysis

import "github.com/memtrace/memtrace/logfmt"

// Ingest: what each alloc, free and exit line does to the model, in log
// order (apply in load.go calls these; applyMeta in meta.go the rest).

func (m *Model) proc(pid int64) int32 {
	if p, ok := m.procIdx[pid]; ok {
		return p
	}
	m.Procs = append(m.Procs, Proc{PID: pid, live: map[uint64]int32{}})
	p := int32(len(m.Procs) - 1)
	m.procIdx[pid] = p
	return p
}

func (m *Model) defaultProc() int32 {
	if m.defProc < 0 {
		m.defProc = m.proc(m.Header.PID)
	}
	return m.defProc
}

// thread returns the current incarnation of tid, creating it (or a new
// incarnation when the old one exited) as needed.
func (m *Model) thread(tid int64, name []byte, ts uint64) uint32 {
	if i, ok := m.threadIdx[tid]; ok {
		t := &m.Threads[i]
		if !t.Exited || ts <= t.ExitTS {
			if len(name) > 0 && string(name) != t.Name {
				t.Name = string(name)
				m.nameRev++
			}
			return i
		}
	}
	m.Threads = append(m.Threads, Thread{TID: tid, Name: string(name), Proc: m.defaultProc(), FirstTS: ts})
	i := uint32(len(m.Threads) - 1)
	m.threadIdx[tid] = i
	m.nameRev++
	return i
}

func (m *Model) op(o logfmt.Op, text []byte) uint8 {
	if o != logfmt.OpOther {
		return uint8(o)
	}
	if id, ok := m.opIdx[string(text)]; ok {
		return id
	}
	if len(m.opNames) >= 255 {
		return uint8(logfmt.OpOther)
	}
	m.opNames = append(m.opNames, string(text))
	id := uint8(len(m.opNames) - 1)
	m.opIdx[string(text)] = id
	return id
}

func (m *Model) seeTS(ts uint64) {
	if !m.anyTS {
		m.MinTS, m.MaxTS, m.anyTS = ts, ts, true
	} else {
		if ts < m.MinTS {
			m.MinTS = ts
		}
		if ts > m.MaxTS {
			m.MaxTS = ts
		}
	}
	if ts < m.lastTS {
		m.OutOfOrder = true
	}
	m.lastTS = ts
}

// addAlloc records an allocation and matches it against orphan frees that
// were read before it (only possible in unordered logs).
func (m *Model) addAlloc(ti uint32, op uint8, ts, size, ptr uint64) uint32 {
	var id uint32
	if n := len(m.freeSlots); m.SummaryOnly && n > 0 {
		id = m.freeSlots[n-1]
		m.freeSlots = m.freeSlots[:n-1]
		m.TS[id], m.Size[id], m.Ptr[id], m.Thread[id], m.Op[id], m.Stack[id] = ts, size, ptr, ti, op, 0
		m.FreeTS[id], m.FreeThread[id], m.FreeStack[id], m.FreeOp[id], m.freeAt[id] = 0, NoThread, 0, 0, 0
		m.allocAt[id] = m.allocsRead
		bitClear(m.superseded, id)
	} else {
		if len(m.TS) == cap(m.TS) {
			m.Reserve(m.expected(len(m.TS), nextCap(cap(m.TS))))
		}
		if len(m.TS) >= m.prefaulted {
			m.prefaultColumns()
		}
		if m.SummaryOnly {
			m.allocAt = append(m.allocAt, m.allocsRead)
		}
		m.freeAt = append(m.freeAt, 0)
		id = uint32(len(m.TS))
		m.TS = append(m.TS, ts)
		m.Size = append(m.Size, size)
		m.Ptr = append(m.Ptr, ptr)
		m.Thread = append(m.Thread, ti)
		m.Op = append(m.Op, op)
		m.Stack = append(m.Stack, 0)
		m.FreeTS = append(m.FreeTS, 0)
		m.FreeThread = append(m.FreeThread, NoThread)
		m.FreeStack = append(m.FreeStack, 0)
		m.FreeOp = append(m.FreeOp, 0)
		if int(id>>6) >= len(m.superseded) {
			m.superseded = append(m.superseded, 0)
		}
	}
	m.allocsRead++
	t := &m.Threads[ti]
	t.Allocs++
	t.AllocBytes = satAdd(t.AllocBytes, size)
	t.LiveCount++
	t.addLive(size)
	t.LastTS = ts
	if !m.SummaryOnly {
		if n := len(t.allocs); n > 0 && m.TS[t.allocs[n-1]] > ts {
			t.unordered = true
		}
		if len(t.allocs) == cap(t.allocs) {
			regrow(&t.allocs, m.expected(len(t.allocs), nextCap(cap(t.allocs))))
			prefault(t.allocs, len(t.allocs), cap(t.allocs))
		}
		t.allocs = append(t.allocs, id)
	}
	if ptr == 0 {
		return id
	}
	p := &m.Procs[t.Proc]
	if m.OutOfOrder && len(p.pending) > 0 {
		if fs := p.pending[ptr]; len(fs) > 0 {
			// The earliest orphan free at or after this allocation is its free.
			best := -1
			for k, f := range fs {
				if m.Orphans.TS[f] >= ts && (best < 0 || m.Orphans.TS[f] < m.Orphans.TS[fs[best]]) {
					best = k
				}
			}
			if best >= 0 {
				f := fs[best]
				fs = append(fs[:best], fs[best+1:]...)
				if len(fs) == 0 {
					delete(p.pending, ptr)
				} else {
					p.pending[ptr] = fs
				}
				m.Orphans.Claimed[f] = int32(id)
				m.Counts.UnmatchedFrees--
				m.setFreed(id, m.Orphans.Thread[f], m.Orphans.Op[f], m.Orphans.TS[f], m.Orphans.Stack[f])
				m.freeAt[id] = m.Orphans.at[f]
				return id
			}
		}
	}
	if old, ok := p.live[ptr]; ok {
		m.supersede(old, p.dup[ptr], op)
		if p.dup == nil {
			p.dup = map[uint64][]int32{}
		}
		p.dup[ptr] = append(p.dup[ptr], old)
	}
	p.live[ptr] = int32(id)
	return id
}

// setFreed marks allocation id freed and moves its bytes out of live.
func (m *Model) setFreed(id uint32, by uint32, op uint8, ts uint64, stack uint32) {
	m.FreeTS[id], m.FreeThread[id], m.FreeOp[id], m.FreeStack[id] = ts, by, op, stack
	t := &m.Threads[m.Thread[id]]
	sz := m.Size[id]
	t.Frees++
	t.addFreed(sz)
	t.LiveCount--
	t.subLive(sz)
	if bitGet(m.superseded, id) {
		t.supCount--
		t.sup.sub(sz)
	}
	if !m.OutOfOrder {
		// Only a log that declares time order (a memtrace header before
		// any event) may have its pairs forgotten: in memtrack's buffered
		// logs a free read later can still belong to this allocation.
		if m.SummaryOnly && m.ordered {
			m.freeSlots = append(m.freeSlots, id)
		}
		return
	}
	// In an unordered log every pair may be re-matched by Finish, so
	// slots are no longer recycled.
	p := &m.Procs[t.Proc]
	if p.lastFreed == nil {
		p.lastFreed = map[uint64]int32{}
	}
	ptr := m.Ptr[id]
	if old, ok := p.lastFreed[ptr]; !ok || m.TS[id] >= m.TS[old] {
		p.lastFreed[ptr] = int32(id)
	}
}

// addFree matches a free to the latest live allocation of that address
// made at or before it. It returns the allocation id, or ^orphan id.
func (m *Model) addFree(ti uint32, op uint8, ts, size uint64, hasSize bool, ptr uint64) int64 {
	t := &m.Threads[ti]
	t.FreeCalls++
	t.LastTS = ts
	// Read after every alloc line so far: its position is their number.
	return m.matchFree(ti, op, ts, size, hasSize, ptr, 0, m.allocsRead)
}

func (m *Model) matchFree(ti uint32, op uint8, ts, size uint64, hasSize bool, ptr uint64, stack, at uint32) int64 {
	p := &m.Procs[m.Threads[ti].Proc]
	if ptr != 0 {
		if id, ok := p.live[ptr]; ok {
			best := int32(-1)
			if m.TS[id] <= ts {
				best = id
			}
			dups := p.dup[ptr]
			bestK := -1
			for k, d := range dups {
				if m.TS[d] <= ts && (best < 0 || m.TS[d] > m.TS[best]) {
					best, bestK = d, k
				}
			}
			if best >= 0 {
				if bestK >= 0 {
					dups = append(dups[:bestK], dups[bestK+1:]...)
				} else if len(dups) > 0 {
					p.live[ptr] = dups[len(dups)-1]
					dups = dups[:len(dups)-1]
				} else {
					delete(p.live, ptr)
				}
				if len(dups) == 0 {
					delete(p.dup, ptr)
				} else {
					p.dup[ptr] = dups
				}
				m.setFreed(uint32(best), ti, op, ts, stack)
				m.freeAt[best] = at
				return int64(best)
			}
		}
		if x, ok := p.lastFreed[ptr]; ok && m.TS[x] <= ts && m.FreeTS[x] > ts {
			// Unordered log: this free comes between x's allocation and
			// the free it was given, so it is x's; that later free goes
			// back to matching (to an allocation read later, maybe).
			gThread, gOp, gTS, gStack, gAt := m.FreeThread[x], m.FreeOp[x], m.FreeTS[x], m.FreeStack[x], m.freeAt[x]
			m.FreeThread[x], m.FreeOp[x], m.FreeTS[x], m.FreeStack[x], m.freeAt[x] = ti, op, ts, stack, at
			m.matchFree(gThread, gOp, gTS, m.Size[x], true, ptr, gStack, gAt)
			return int64(x)
		}
	}
	o := &m.Orphans
	o.TS = append(o.TS, ts)
	o.Size = append(o.Size, size)
	o.HasSize = append(o.HasSize, hasSize)
	o.Ptr = append(o.Ptr, ptr)
	o.Thread = append(o.Thread, ti)
	o.Op = append(o.Op, op)
	o.Stack = append(o.Stack, stack)
	o.Claimed = append(o.Claimed, -1)
	o.at = append(o.at, at)
	k := int32(len(o.TS) - 1)
	m.Counts.UnmatchedFrees++
	if ptr != 0 {
		if p.pending == nil {
			p.pending = map[uint64][]int32{}
		}
		p.pending[ptr] = append(p.pending[ptr], k)
	}
	return ^int64(k)
}
