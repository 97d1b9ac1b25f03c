package report

import (
	"io"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/google/pprof/profile"
)

// writePprof writes a gzipped profile.proto, as a Go heap profile has it:
// alloc_objects and alloc_space are every allocation, inuse_objects and
// inuse_space what is still live at the end of the log (the leaks). With
// several processes each sample carries a pid label.
func (r *report) writePprof(w io.Writer) error {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: "alloc_objects", Unit: "count"},
			{Type: "alloc_space", Unit: "bytes"},
			{Type: "inuse_objects", Unit: "count"},
			{Type: "inuse_space", Unit: "bytes"},
		},
		DefaultSampleType: "alloc_space",
		PeriodType:        &profile.ValueType{Type: "space", Unit: "bytes"},
		Period:            1,
		DurationNanos:     int64(r.all.runtime) * 1000,
		Comments:          []string{"memtrace report of " + logNames(r.logs)},
	}
	mappings := map[string]*profile.Mapping{}
	mapping := func(module string) *profile.Mapping {
		if m, ok := mappings[module]; ok {
			return m
		}
		m := &profile.Mapping{ID: uint64(len(p.Mapping) + 1), File: module, HasFunctions: true, HasFilenames: r.cache != nil, HasLineNumbers: r.cache != nil}
		p.Mapping = append(p.Mapping, m)
		mappings[module] = m
		return m
	}
	functions := map[[3]string]*profile.Function{}
	function := func(name, system, file string) *profile.Function {
		k := [3]string{name, system, file}
		if f, ok := functions[k]; ok {
			return f
		}
		f := &profile.Function{ID: uint64(len(p.Function) + 1), Name: name, SystemName: system, Filename: file}
		p.Function = append(p.Function, f)
		functions[k] = f
		return f
	}
	locations := map[string]*profile.Location{}
	location := func(f *frameInfo) *profile.Location {
		r.resolve(f)
		k := f.module + "\x00" + f.name + "\x00" + f.file + "\x00" + strconv.Itoa(f.line)
		if !r.t.merge {
			k += "\x00" + strconv.FormatUint(f.offset, 16)
		}
		if l, ok := locations[k]; ok {
			return l
		}
		system := f.mangled
		if system == "" {
			system = f.name
		}
		l := &profile.Location{ID: uint64(len(p.Location) + 1),
			Line: []profile.Line{{Function: function(f.name, system, f.file), Line: int64(f.line)}}}
		if f.module != "" {
			l.Mapping = mapping(f.module)
		}
		p.Location = append(p.Location, l)
		locations[k] = l
		return l
	}
	secs := []*section{r.all}
	if r.multi() {
		secs = r.secs
	}
	for _, s := range secs {
		ids := make([]int32, 0, len(s.bySite))
		for id := range s.bySite {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			c := s.bySite[id]
			if c.Calls == 0 {
				continue
			}
			st := r.t.sites[id]
			smp := &profile.Sample{Value: []int64{c.Calls, int64(c.Bytes), c.Leaks, int64(c.LeakedBytes)}}
			if len(st.frames) == 0 {
				smp.Location = []*profile.Location{location(&frameInfo{name: st.label(), looked: true})}
			}
			for k := range st.frames {
				smp.Location = append(smp.Location, location(&st.frames[k]))
			}
			if r.multi() {
				smp.NumLabel = map[string][]int64{"pid": {s.pid}}
				smp.Label = map[string][]string{"process": {s.title}}
				if s.log != nil {
					smp.Label["log"] = []string{filepath.Base(s.log.path)}
				}
			}
			p.Sample = append(p.Sample, smp)
		}
	}
	if err := p.CheckValid(); err != nil {
		return err
	}
	return p.Write(w)
}
