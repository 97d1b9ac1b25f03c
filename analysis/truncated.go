package analysis

import (
	"cmp"
	"slices"
)

// Truncated stacks. The agent writes "[memtrace] stack truncated=1
// reason=R" after the frames of a stack it knows is cut short: R is depth
// (--stack-depth was reached), fp (the frame-pointer chain broke),
// no-unwind-info or bad-read (the unwinder had no table for a frame, or
// could not read the stack). The model keeps the reason per stack and
// counts stacks and events per reason, so that a ranking never presents a
// cut stack as a whole one.

// ReasonMaxFrames is the reason given to a stack that the reader cut at
// logfmt.MaxFrames frames.
const ReasonMaxFrames = "max-frames"

// maxReasons bounds the distinct reasons kept: a log cannot grow the
// table; further ones count as "other".
const maxReasons = 16

type truncState struct {
	names  []string // reason id → name; 0 is "no truncation"
	stacks []int64  // per reason id: distinct stacks
	events []int64  // per reason id: events
	of     []uint8  // stack id → reason id (0: whole), grown on demand
}

// Truncation is how many call stacks were cut short for one reason.
type Truncation struct {
	Reason string
	Stacks int64 // distinct stacks
	Events int64 // alloc and free events that carry one of them
}

// truncReason interns a reason; an empty one is "unknown".
func (m *Model) truncReason(r string) uint8 {
	t := &m.trunc
	if len(t.names) == 0 {
		t.names, t.stacks, t.events = []string{""}, []int64{0}, []int64{0}
	}
	if r == "" {
		r = "unknown"
	}
	for i, n := range t.names {
		if i > 0 && n == r {
			return uint8(i)
		}
	}
	if len(t.names) > maxReasons {
		r = "other"
		for i, n := range t.names {
			if i > 0 && n == r {
				return uint8(i)
			}
		}
	}
	t.names = append(t.names, r)
	t.stacks = append(t.stacks, 0)
	t.events = append(t.events, 0)
	return uint8(len(t.names) - 1)
}

// noteTruncated counts one event whose stack s was cut for reason r. The
// empty stack (an event without frames) is never marked: it stands for
// every such event.
func (m *Model) noteTruncated(s uint32, r uint8) {
	t := &m.trunc
	t.events[r]++
	if s == 0 {
		return
	}
	for int(s) >= len(t.of) {
		t.of = append(t.of, 0)
	}
	if t.of[s] == 0 {
		t.of[s] = r
		t.stacks[r]++
	}
}

// StackTruncation is the reason stack s was cut short, "" for a whole one.
func (m *Model) StackTruncation(s uint32) string {
	t := &m.trunc
	if int(s) >= len(t.of) || t.of[s] == 0 {
		return ""
	}
	return t.names[t.of[s]]
}

// Truncations lists the reasons stacks were cut, most stacks first.
func (m *Model) Truncations() []Truncation {
	t := &m.trunc
	var out []Truncation
	for i := 1; i < len(t.names); i++ {
		if t.events[i] > 0 {
			out = append(out, Truncation{t.names[i], t.stacks[i], t.events[i]})
		}
	}
	slices.SortFunc(out, func(a, b Truncation) int {
		if c := cmp.Compare(b.Stacks, a.Stacks); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Events, a.Events); c != 0 {
			return c
		}
		return cmp.Compare(a.Reason, b.Reason)
	})
	return out
}

// TruncatedTotal adds the truncations up.
func TruncatedTotal(ts []Truncation) (stacks, events int64) {
	for _, t := range ts {
		stacks += t.Stacks
		events += t.Events
	}
	return stacks, events
}
