package heapproftest

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/google/pprof/profile"
)

// Want is what a profile is meant to be.
type Want struct {
	// Delta is the window of a delta profile (?seconds=N); 0 for a
	// snapshot.
	Delta time.Duration
	// Default is the default sample type: inuse_space, or alloc_space for
	// /debug/pprof/allocs.
	Default string
	// Peak: the report's two more sample types follow Go's four.
	Peak bool
	// PID: every sample carries its process's pid (string label "pid").
	PID bool
}

// goTypes are Go's heap profile's sample types, in its order.
var goTypes = []string{"alloc_objects/count", "alloc_space/bytes", "inuse_objects/count", "inuse_space/bytes"}

// labelKey is a key both servers take as a label name (Prometheus's).
var labelKey = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// Check returns the rules p breaks, one line each; none when it reads as
// want says.
func Check(p *profile.Profile, want Want) []string {
	var bad []string
	fail := func(f string, a ...any) { bad = append(bad, fmt.Sprintf(f, a...)) }
	if err := p.CheckValid(); err != nil {
		fail("invalid profile: %v", err)
	}
	switch {
	case want.Delta == 0 && p.DurationNanos != 0:
		fail("snapshot with duration %d ns: Parca reads it as a delta (a rate, summed when merged)", p.DurationNanos)
	case want.Delta != 0 && p.DurationNanos != want.Delta.Nanoseconds():
		fail("delta profile with duration %d ns, want its window %d ns", p.DurationNanos, want.Delta.Nanoseconds())
	}
	if p.TimeNanos < 0 {
		fail("time %d", p.TimeNanos)
	}
	types := append([]string(nil), goTypes...)
	if want.Peak {
		types = append(types, "peak_objects/count", "peak_space/bytes")
	}
	var got []string
	for _, st := range p.SampleType {
		got = append(got, st.Type+"/"+st.Unit)
	}
	if fmt.Sprint(got) != fmt.Sprint(types) {
		fail("sample types %v, want %v (Go's heap profile's names and units)", got, types)
	}
	if p.PeriodType == nil || p.PeriodType.Type != "space" || p.PeriodType.Unit != "bytes" || p.Period <= 0 {
		fail("period %v %d, want space/bytes and a positive period", p.PeriodType, p.Period)
	}
	def := want.Default
	if def == "" {
		def = "inuse_space"
	}
	if p.DefaultSampleType != def {
		fail("default sample type %q, want %q", p.DefaultSampleType, def)
	}
	for i, s := range p.Sample {
		if len(s.NumLabel) > 0 {
			fail("sample %d has numeric labels %v: Parca and Pyroscope make series labels of string labels only", i, s.NumLabel)
		}
		for k, v := range s.Label {
			if !labelKey.MatchString(k) {
				fail("sample %d: label key %q is not a label name", i, k)
			}
			if len(v) != 1 || v[0] == "" {
				fail("sample %d: label %q has values %q, want one", i, k, v)
			}
		}
		if want.PID {
			if v := s.Label["pid"]; len(v) != 1 {
				fail("sample %d: no string label pid", i)
			} else if n, err := strconv.ParseUint(v[0], 10, 32); err != nil || n == 0 {
				fail("sample %d: pid label %q is not a pid", i, v[0])
			}
		}
		for k, v := range s.Value {
			if v < 0 {
				fail("sample %d: value %d of %s is negative", i, v, got[k])
			}
		}
		if len(bad) > 8 {
			return append(bad, "…")
		}
	}
	return bad
}

// PID is a sample's pid label as a number, 0 without one.
func PID(s *profile.Sample) int64 {
	if v := s.Label["pid"]; len(v) == 1 {
		n, _ := strconv.ParseInt(v[0], 10, 64)
		return n
	}
	return 0
}
