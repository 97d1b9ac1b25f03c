package preload

import (
	"io"
	"os"
	"os/exec"
	"testing"

	"github.com/memtrace/memtrace/agent"
	"github.com/memtrace/memtrace/runner"
)

// testSession is the Session Run gives the converter for opts, writing
// to out.
func testSession(opts Options, out io.Writer) *agent.Session {
	return runner.NewSession(&opts, out, io.Discard, nil, (&Source{}).Configure)
}

// binLog is the binary mode as Run sets it up, its converter writing the
// file opts.Output.
type binLog struct {
	*binRun
	f *os.File
}

func startBinaryLog(t *testing.T, opts Options, cmd *exec.Cmd) (*binLog, error) {
	t.Helper()
	b, err := startBinary(opts, cmd)
	if err != nil {
		return nil, err
	}
	f, err := os.Create(opts.Output.Path)
	if err != nil {
		b.close()
		return nil, err
	}
	b.conv = newConverter(b.reg, testSession(opts, f), opts.Interval, opts.StackDepth)
	return &binLog{b, f}, nil
}

// finish completes the log and closes it.
func (b *binLog) finish(Options) error {
	b.binRun.finish()
	return b.f.Close()
}

// detach ends the log while the program runs on, and closes it.
func (b *binLog) detach(Options) error {
	b.binRun.detach()
	return b.f.Close()
}

func (b *binLog) close() {
	b.binRun.close()
	b.f.Close()
}
