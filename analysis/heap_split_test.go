package analysis

import "testing"

// The mappings' share of a process's figures, and the malloc family's
// own peak, which comes before the process's.
func TestReportCostsMmapSplit(t *testing.T) {
	l := &logb{}
	l.meta("header", "pid", "100", "comm", "app")
	l.alloc(1, "main", "malloc", 10, 100, 0x10).frame(0, "a", 1) // malloc family's peak: 100 at ts 10
	l.free(1, "main", "free", 11, 100, 0x10)
	l.alloc(1, "main", "mmap", 12, 4096, 0x7000).frame(0, "m", 1)
	l.alloc(1, "main", "malloc", 13, 60, 0x20).frame(0, "b", 1) // the peak: 4156 at ts 13
	l.free(1, "main", "munmap", 14, 4096, 0x7000)
	l.alloc(1, "main", "mremap", 15, 8, 0x8000).frame(0, "r", 1)
	m := load(t, l.b)
	p := m.ReportCosts().Procs[0]
	if p.PeakBytes != 4156 || p.PeakTS != 13 || p.HeapPeak != 100 || p.HeapPeakTS != 10 {
		t.Fatalf("peak %d at %d, malloc family's %d at %d", p.PeakBytes, p.PeakTS, p.HeapPeak, p.HeapPeakTS)
	}
	wantMmap := CostFigures{Calls: 2, Bytes: 4104, PeakCount: 1, PeakBytes: 4096, Leaks: 1, LeakedBytes: 8, Largest: lg(4096, 0, 4096, 8)}
	if p.Mmap != wantMmap {
		t.Fatalf("mmap\n got %+v\nwant %+v", p.Mmap, wantMmap)
	}
	wantHeap := CostFigures{Calls: 2, Bytes: 160, Temporary: 1, TempBytes: 100, PeakCount: 1, PeakBytes: 60, Leaks: 1, LeakedBytes: 60}
	if h := p.Heap(); h != wantHeap {
		t.Fatalf("heap\n got %+v\nwant %+v", h, wantHeap)
	}
}
