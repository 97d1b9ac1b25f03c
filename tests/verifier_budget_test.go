//go:build amd64 || arm64

package tests

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/memtrace/memtrace/fdtrace"
	"github.com/memtrace/memtrace/tracer"
)

// The verifier's limits (include/linux/bpf.h, kernel/bpf/verifier.c).
const (
	verifierInsnLimit  = 1000000 // BPF_COMPLEXITY_LIMIT_INSNS
	verifierStackLimit = 512     // MAX_BPF_STACK, for a chain of calls
	verifierMaxCalls   = 8       // MAX_CALL_FRAMES
	budgetMargin       = 0.10    // a program within this share of a limit fails
)

// budgetConfigs are the settings a program is verified under: without
// stacks, and with the longest DWARF walk and sampling on, which reach
// the most code, on the host's PID namespace and in one of memtrace's own.
var budgetConfigs = []struct {
	name string
	vars map[string]any
}{
	{"no stacks", map[string]any{"stack_depth": uint32(0)}},
	{"dwarf 127", map[string]any{"stack_depth": uint32(127), "unwind_dwarf": uint8(1), "sample_rate": uint64(65536), "follow": uint8(1)}},
	// --stack-unwind fp and --stack-threads: their own loops (the fd
	// programs' scan for the wrapper's caller, the thread-name match).
	{"fp 127, threads", map[string]any{"stack_depth": uint32(127), "unwind_dwarf": uint8(0), "n_stack_threads": uint32(2),
		"stack_threads": [8][16]byte{{'m', 'a', 'i', 'n'}, {'w', 'o', 'r', 'k'}}}},
	// memtrace in a PID namespace of its own translates every pid (a
	// call more under some of the walk's frames).
	{"dwarf 127, pidns", map[string]any{"stack_depth": uint32(127), "unwind_dwarf": uint8(1), "sample_rate": uint64(65536), "follow": uint8(1),
		"pidns_dev": uint64(4), "pidns_ino": uint64(0xeffffffc)}},
}

// programBudget is what the verifier said of one program.
type programBudget struct {
	object, program, config string
	insns                   int    // instructions processed
	depths                  []int  // each function's stack, in the verifier's order
	stack                   int    // the deepest chain of calls, as the verifier sums it
	calls                   int    // frames in that chain
	chain                   string // the functions of that chain
}

var (
	processedRe  = regexp.MustCompile(`processed (\d+) insns`)
	stackDepthRe = regexp.MustCompile(`stack depth ([0-9+]+)`)
)

// TestVerifierBudget: every BPF program memtrace loads verifies on this
// kernel (both builds where the kernel runs the default one), and stays more than 10 % under each limit the verifier holds it
// to: instructions processed, the combined stack of a chain of calls
// (callbacks included, each frame rounded up to 32 bytes as the verifier
// does) and the number of frames. The fd syscall-exit program sat at 560
// of 512 stack bytes and nothing said so. MEMTRACE_VERIFIER_TABLE=FILE
// writes the table (docs/kernels.md).
func TestVerifierBudget(t *testing.T) {
	requireBPF(t)
	// Before 5.11 BPF maps count against RLIMIT_MEMLOCK, as memtrace
	// itself raises it.
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	session := tracer.KernelHasAttachType("BPF_TRACE_UPROBE_SESSION")
	var rows []programBudget
	type object struct {
		name string
		load func() (*ebpf.CollectionSpec, error)
		// only: the configs verified, all when nil
		only map[string]bool
	}
	// The compat build loads on every kernel of the matrix, the default
	// one where the kernel has every helper it calls. Where both do, the
	// compat build is verified in its widest configs only (the verifier
	// under TCG is most of a kernel's time in the matrix).
	widest := map[string]bool{budgetConfigs[len(budgetConfigs)-1].name: true, "fp 127, threads": true}
	objs := []object{{"memtrace-compat", tracer.LoadMemtraceCompat, widest}, {"fdtrack-compat", fdtrace.LoadFdtrackCompat, widest}}
	if tracer.KernelNeedsCompat() {
		objs[0].only, objs[1].only = nil, nil
	} else if testing.Short() {
		// make check verifies what this kernel runs; make test, and the
		// kernel matrix on the kernels that run it, the compat build.
		t.Log("-short: the compat build is not verified here; make test verifies it")
		objs = []object{{"memtrace", tracer.LoadMemtrace, nil}, {"fdtrack", fdtrace.LoadFdtrack, nil}}
	} else {
		objs = append([]object{{"memtrace", tracer.LoadMemtrace, nil}, {"fdtrack", fdtrace.LoadFdtrack, nil}}, objs...)
	}
	// One cache of the kernel's BTF for every load, as memtrace has.
	cache := btf.NewCache()
	for _, obj := range objs {
		base, err := obj.load()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for n := range base.Programs {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, cfg := range budgetConfigs {
			if obj.only != nil && !obj.only[cfg.name] {
				continue
			}
			spec, maps, err := budgetMaps(base, cfg.vars, cache)
			if err != nil {
				t.Fatalf("%s (%s): create the maps: %v", obj.name, cfg.name, err)
			}
			for _, name := range names {
				if strings.Contains(name, "session") && !session {
					// memtrace loads an empty program in its place.
					continue
				}
				row, err := verifyOne(spec, name, maps, cache)
				if err != nil {
					t.Errorf("%s %s (%s): %v", obj.name, name, cfg.name, err)
					continue
				}
				row.object, row.config = obj.name, cfg.name
				rows = append(rows, row)
			}
			for _, m := range maps {
				m.Close()
			}
		}
	}
	var tb strings.Builder
	fmt.Fprintf(&tb, "| object | program | config | insns processed (limit %d) | combined stack (limit %d) | frames (limit %d) | deepest chain |\n|---|---|---|---|---|---|---|\n", verifierInsnLimit, verifierStackLimit, verifierMaxCalls)
	for _, r := range rows {
		fmt.Fprintf(&tb, "| %s | %s | %s | %d | %d | %d | %s |\n", r.object, r.program, r.config, r.insns, r.stack, r.calls, r.chain)
		for _, l := range []struct {
			what       string
			got, limit int
		}{{"instructions processed", r.insns, verifierInsnLimit}, {"combined stack bytes", r.stack, verifierStackLimit}, {"frames", r.calls, verifierMaxCalls}} {
			if float64(l.got) > float64(l.limit)*(1-budgetMargin) {
				t.Errorf("%s %s (%s): %s %d, within %.0f %% of the verifier's limit %d (chain %s)", r.object, r.program, r.config, l.what, l.got, budgetMargin*100, l.limit, r.chain)
			}
		}
	}
	t.Logf("kernel %s:\n%s", kernelRelease(t), tb.String())
	if f := os.Getenv("MEMTRACE_VERIFIER_TABLE"); f != "" {
		if err := os.WriteFile(f, []byte(tb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// budgetMaps is base with vars set and its maps, created once for every
// program verified under these settings (the variables are the frozen
// .rodata map's contents, which the verifier reads as constants): creating
// every map of the object for each program was most of this test's time.
func budgetMaps(base *ebpf.CollectionSpec, vars map[string]any, cache *btf.Cache) (*ebpf.CollectionSpec, map[string]*ebpf.Map, error) {
	spec := base.Copy()
	for v, x := range vars {
		if sv := spec.Variables[v]; sv != nil {
			if err := sv.Set(x); err != nil {
				return nil, nil, fmt.Errorf("set %s: %w", v, err)
			}
		}
	}
	noProgs := *spec
	noProgs.Programs = nil
	coll, err := ebpf.NewCollectionWithOptions(&noProgs, ebpf.CollectionOptions{Cache: cache})
	if err != nil {
		return nil, nil, err
	}
	return spec, coll.Maps, nil
}

// verifyOne loads program name of spec alone over maps, spec's maps as
// budgetMaps made them, and reads the verifier's figures of it.
func verifyOne(spec *ebpf.CollectionSpec, name string, maps map[string]*ebpf.Map, cache *btf.Cache) (programBudget, error) {
	ps := spec.Programs[name].Copy()
	one := *spec
	one.Programs = map[string]*ebpf.ProgramSpec{name: ps}
	coll, err := ebpf.NewCollectionWithOptions(&one, ebpf.CollectionOptions{MapReplacements: maps, Cache: cache,
		Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats}})
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) && len(ve.Log) > 0 {
			return programBudget{}, fmt.Errorf("refused: %s", ve.Log[len(ve.Log)-1])
		}
		return programBudget{}, err
	}
	prog := coll.Programs[name]
	log := prog.VerifierLog
	// The functions the kernel kept, in its order: unreached ones are
	// not in the verifier's list of stack depths.
	var kept []string
	if info, err := prog.Info(); err == nil {
		if fos, err := info.FuncInfos(); err == nil {
			for _, fo := range fos {
				kept = append(kept, fo.Func.Name)
			}
		}
	}
	coll.Close()
	r := programBudget{program: name}
	m := processedRe.FindStringSubmatch(log)
	d := stackDepthRe.FindStringSubmatch(log)
	if m == nil || d == nil {
		return r, fmt.Errorf("no instruction count or stack depth in the verifier's log")
	}
	r.insns, _ = strconv.Atoi(m[1])
	for _, s := range strings.Split(d[1], "+") {
		n, _ := strconv.Atoi(s)
		r.depths = append(r.depths, n)
	}
	funcs, edges := callGraph(ps.Instructions)
	if len(kept) > 0 {
		funcs = kept
	}
	if len(funcs) != len(r.depths) {
		return r, fmt.Errorf("the verifier gave %d functions' stack depths, the program has %d functions (%v)", len(r.depths), len(funcs), funcs)
	}
	r.stack, r.calls, r.chain = deepestChain(funcs, edges, r.depths)
	return r, nil
}

// callGraph lists a program's functions in the order of their code (the
// verifier's order) and, for each, the functions it calls or passes as a
// callback.
func callGraph(insns asm.Instructions) ([]string, map[string][]string) {
	var funcs []string
	edges := map[string][]string{}
	cur := ""
	for _, ins := range insns {
		if sym := ins.Symbol(); sym != "" {
			cur = sym
			funcs = append(funcs, sym)
		}
		if (ins.IsFunctionCall() || ins.IsLoadOfFunctionPointer()) && ins.Reference() != "" {
			edges[cur] = append(edges[cur], ins.Reference())
		}
	}
	return funcs, edges
}

// deepestChain is the largest sum of frames along a chain of calls from
// the program's entry, each frame's stack rounded up to 32 bytes (at
// least 32), as the verifier's check_max_stack_depth sums them.
func deepestChain(funcs []string, edges map[string][]string, depths []int) (int, int, string) {
	depth := map[string]int{}
	for i, f := range funcs {
		depth[f] = max(32, (depths[i]+31)/32*32)
	}
	var best, bestCalls int
	var bestChain []string
	var walk func(f string, sum int, chain []string)
	walk = func(f string, sum int, chain []string) {
		if len(chain) > verifierMaxCalls+1 {
			return
		}
		for _, c := range chain {
			if strings.HasPrefix(c, f+" ") {
				return // recursion: the verifier refuses it
			}
		}
		sum += depth[f]
		chain = append(chain, f+" "+strconv.Itoa(depth[f]))
		if sum > best || sum == best && len(chain) > bestCalls {
			best, bestCalls, bestChain = sum, len(chain), append([]string(nil), chain...)
		}
		for _, g := range edges[f] {
			walk(g, sum, chain)
		}
	}
	if len(funcs) > 0 {
		walk(funcs[0], 0, nil)
	}
	return best, bestCalls, strings.Join(bestChain, " → ")
}
