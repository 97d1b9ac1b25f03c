package launch

import (
	"io"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/agent"
	"github.com/memtrace/memtrace/runner"
)

// launch runs o's program as memtrace does (runner.Run), with tr for the
// tracer: no BPF, no watchdog.
func launch(o *Options, tr tracerAPI, stderr io.Writer) (int, error) {
	return runner.Run(*o, stderr, &Source{fake: tr}, nil)
}

// attach attaches to o.PIDs as memtrace does, with tr for the tracer.
func attach(o *Options, tr tracerAPI, stderr io.Writer) error {
	_, err := runner.Run(*o, stderr, &Source{fake: tr}, nil)
	return err
}

// withoutClosing is stderr without the closing lines that end a run.
func withoutClosing(stderr string) string {
	before, _, _ := strings.Cut(stderr, "memtrace stats:\n")
	return before
}

// noFallback is a fallback source that must not be used.
type noFallback struct{ t *testing.T }

func (f noFallback) Start(*runner.Handle) (int, error) {
	f.t.Error("fell back to LD_PRELOAD")
	return 1, io.EOF
}
func (noFallback) Configure(*agent.Config)                           {}
func (noFallback) Trace(*runner.Handle, *agent.Session) (int, error) { return 1, io.EOF }
func (noFallback) Close() error                                      { return nil }
