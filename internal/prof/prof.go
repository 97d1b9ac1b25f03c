package prof

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/memtrace/memtrace/internal/asuser"
)

// Env names the file the CPU profile goes to.
const Env = "MEMTRACE_CPUPROFILE"

// Do runs fn, profiling the CPU into the file $MEMTRACE_CPUPROFILE names
// when it is set, and returns fn's result. The profile is written when fn
// returns, before the caller's os.Exit, which would skip a deferred stop.
// A profile that cannot be started is one line on stderr and fn runs
// anyway: a measurement aid must never stop the tracing.
func Do(fn func() int) int { return do(os.Getenv(Env), os.Stderr, fn) }

func do(path string, stderr io.Writer, fn func() int) int {
	if path == "" {
		return fn()
	}
	f, err := asuser.Create(path)
	if err != nil {
		fmt.Fprintf(stderr, "memtrace: %s: create the CPU profile: %v; fix the path or unset %s\n", Env, err, Env)
		return fn()
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		fmt.Fprintf(stderr, "memtrace: %s: start the CPU profile: %v; unset %s\n", Env, err, Env)
		return fn()
	}
	code := fn()
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		fmt.Fprintf(stderr, "memtrace: %s: write the CPU profile: %v\n", Env, err)
	}
	return code
}
