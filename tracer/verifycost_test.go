//go:build amd64 || arm64

package tracer

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
)

// TestStackProgramsVerifyCheaply: with stacks on, each allocation program
// verifies in a bounded number of instructions. The stack capture is a
// global function, checked once per program; inlined at every call site it
// took 400-600 thousand instructions a program (most of a second each, 1.1-1.6 s
// of `memtrace --stack-depth 32 -- /bin/true`), and 12 thousand now. Also
// in a PID namespace (pidns_ino set, bpf/mt_pidns.h), whose id walk adds a
// call under the deepest stack frames: they must still load.
func TestStackProgramsVerifyCheaply(t *testing.T) {
	requireBPF(t)
	const limit = 50000
	processed := regexp.MustCompile(`processed (\d+) insns`)
	for _, pidns := range []uint64{0, 0xF0000001} {
		for _, dwarf := range []uint8{0, 1} {
			for _, name := range []string{"mt_session", "mt_free_multi", "mt_new_multi", "mt_enter_multi", "mt_free"} {
				spec, err := LoadMemtrace()
				if err != nil {
					t.Fatal(err)
				}
				if err := sizeUnwindMaps(spec, dwarf == 1, 1<<16); err != nil {
					t.Fatal(err)
				}
				for v, x := range map[string]any{"stack_depth": uint32(32), "unwind_dwarf": dwarf, "pidns_ino": pidns} {
					if err := spec.Variables[v].Set(x); err != nil {
						t.Fatal(err)
					}
				}
				for n := range spec.Programs {
					if n != name {
						delete(spec.Programs, n)
					}
				}
				coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats}})
				if err != nil {
					t.Fatalf("%s (dwarf %d, PID namespace %#x): %v", name, dwarf, pidns, err)
				}
				m := processed.FindStringSubmatch(coll.Programs[name].VerifierLog)
				coll.Close()
				if m == nil {
					t.Fatalf("%s: no instruction count in the verifier's log", name)
				}
				n, _ := strconv.Atoi(m[1])
				t.Logf("%s, dwarf %d, PID namespace %#x: %d instructions verified", name, dwarf, pidns, n)
				if n > limit {
					t.Errorf("%s (dwarf %d, PID namespace %#x): the verifier processed %d instructions, want at most %d: is the stack capture inlined again?", name, dwarf, pidns, n, limit)
				}
			}
		}
	}
}
