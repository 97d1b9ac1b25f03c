package live

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// procLabels are the per-process series' labels: cgroup is the cgroup v2
// path, container_id the container it names ("" for none; docs/fleet.md).
var procLabels = []string{"pid", "comm", "cgroup", "container_id"}

var (
	descDropped    = prometheus.NewDesc("memtrace_processes_dropped_total", "Processes --comm, --cgroup or --all selected and memtrace did not trace: over --max-procs, no allocator to probe, or a probe that failed.", nil, nil)
	descLiveBytes  = prometheus.NewDesc("memtrace_live_bytes", "Bytes the process holds in blocks it allocated while traced and has not freed.", procLabels, nil)
	descLiveBlocks = prometheus.NewDesc("memtrace_live_blocks", "Blocks the process holds live.", procLabels, nil)
	descAllocs     = prometheus.NewDesc("memtrace_allocations_total", "Allocations (malloc, new, mmap, ...) traced in the process's current image.", procLabels, nil)
	descAllocBytes = prometheus.NewDesc("memtrace_allocated_bytes_total", "Bytes of the allocations traced.", procLabels, nil)
	descFrees      = prometheus.NewDesc("memtrace_frees_total", "Frees of traced blocks.", procLabels, nil)
	descFreeBytes  = prometheus.NewDesc("memtrace_freed_bytes_total", "Bytes of the frees of traced blocks.", procLabels, nil)
	descLost       = prometheus.NewDesc("memtrace_lost_records_total", "Records the tracer's ring buffer refused (raise --buffer-size).", nil, nil)
	descProbes     = prometheus.NewDesc("memtrace_probes_attached", "Probe sets attached (one per library with allocation functions per traced process).", nil, nil)
	descProcs      = prometheus.NewDesc("memtrace_traced_processes", "Traced processes with a live heap model.", nil, nil)
	descStacks     = prometheus.NewDesc("memtrace_stacks", "Distinct call stacks the model holds.", nil, nil)
	descSince      = prometheus.NewDesc("memtrace_traced_since_seconds", "When tracing began (unix time); an attached process's blocks from before are not counted.", nil, nil)
	descRate       = prometheus.NewDesc("memtrace_sample_rate_bytes", "--sample: mean bytes between sampled allocations (0: every allocation counted; else the figures are estimates).", nil, nil)
	descSampled    = prometheus.NewDesc("memtrace_sampled_live_blocks", "Sampled blocks the process holds live (--sample).", procLabels, nil)
	descUntracked  = prometheus.NewDesc("memtrace_sample_untracked_total", "Sampled blocks the kernel side's table had no room for: not counted in the estimates.", nil, nil)
)

// collector reads the model at each scrape.
type collector struct{ m *Model }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLiveBytes, descLiveBlocks, descAllocs, descAllocBytes, descFrees, descFreeBytes, descLost, descProbes, descProcs, descStacks,
		descSince, descRate, descSampled, descUntracked, descDropped} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	procs, lost, stacks := c.m.Stats()
	for _, p := range procs {
		l := []string{strconv.FormatUint(uint64(p.PID), 10), p.Comm, p.Cgroup, p.ContainerID}
		ch <- prometheus.MustNewConstMetric(descLiveBytes, prometheus.GaugeValue, float64(p.LiveBytes), l...)
		ch <- prometheus.MustNewConstMetric(descLiveBlocks, prometheus.GaugeValue, float64(p.LiveBlocks), l...)
		ch <- prometheus.MustNewConstMetric(descAllocs, prometheus.CounterValue, float64(p.Allocs), l...)
		ch <- prometheus.MustNewConstMetric(descAllocBytes, prometheus.CounterValue, float64(p.AllocBytes), l...)
		ch <- prometheus.MustNewConstMetric(descFrees, prometheus.CounterValue, float64(p.Frees), l...)
		ch <- prometheus.MustNewConstMetric(descFreeBytes, prometheus.CounterValue, float64(p.FreeBytes), l...)
		ch <- prometheus.MustNewConstMetric(descSampled, prometheus.GaugeValue, float64(p.SampledBlocks), l...)
	}
	if since, _ := c.m.TracedSince(); !since.IsZero() {
		ch <- prometheus.MustNewConstMetric(descSince, prometheus.GaugeValue, float64(since.UnixNano())/1e9)
	}
	ch <- prometheus.MustNewConstMetric(descRate, prometheus.GaugeValue, float64(c.m.SampleRate()))
	var untracked uint64
	if c.m.Untracked != nil {
		untracked = c.m.Untracked()
	}
	ch <- prometheus.MustNewConstMetric(descUntracked, prometheus.CounterValue, float64(untracked))
	if c.m.Dropped != nil {
		ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(c.m.Dropped()))
	}
	ch <- prometheus.MustNewConstMetric(descLost, prometheus.CounterValue, float64(lost))
	probes := 0
	if c.m.Probes != nil {
		probes = c.m.Probes()
	}
	ch <- prometheus.MustNewConstMetric(descProbes, prometheus.GaugeValue, float64(probes))
	ch <- prometheus.MustNewConstMetric(descProcs, prometheus.GaugeValue, float64(len(procs)))
	ch <- prometheus.MustNewConstMetric(descStacks, prometheus.GaugeValue, float64(stacks))
}
