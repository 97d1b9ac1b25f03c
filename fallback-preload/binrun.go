package preload

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/internal/logio"
)

// converterNice is the converter thread's nice value.
const converterNice = 19

// binRun is Run's binary mode: the library appends records to a shared
// region and this process converts them to the text log while the program
// runs (see shm.go and convert.go).
type binRun struct {
	reg    *region
	out    io.Writer
	file   *os.File
	zw     io.WriteCloser // the file's compressor (FILE.zst, FILE.gz), closed before it
	viewer net.Conn
	conv   *converter
	stop   chan struct{}
	done   chan struct{}
	// started: the converter goroutine runs and must be waited for.
	started bool
}

// startBinary creates the region and the output (viewer, when not nil,
// takes the log instead of a file) and sets up cmd: the region as fd 3 and
// in the environment; size and thread filters are applied by the
// converter, so the library is not told about them, nor about the viewer.
func startBinary(opts Options, cmd *exec.Cmd, viewer net.Conn) (*binRun, error) {
	reg, err := newRegion(opts.SharedMemory)
	if err != nil {
		return nil, fmt.Errorf("%w (or run with the library's text mode)", err)
	}
	b := &binRun{reg: reg, stop: make(chan struct{}), done: make(chan struct{})}
	if viewer != nil {
		b.viewer, b.out = viewer, viewer
	} else if opts.Output != "" {
		f, err := opts.openLog()
		if err != nil {
			reg.close()
			return nil, err
		}
		b.file, b.out = f, f
		if k := logio.KindOf(opts.Output); k != logio.Plain {
			zw, err := logio.NewWriter(f, k, logio.FlushInterval)
			if err != nil {
				f.Close()
				reg.close()
				return nil, err
			}
			b.zw, b.out = zw, zw
		}
	} else {
		b.out = pick(opts.Stderr, os.Stderr)
	}
	var env []string
	for _, kv := range cmd.Env {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "MEMTRACK_MIN_SIZE", "MEMTRACK_TRACK_THREADS", "MEMTRACK_OUTPUT", "MEMTRACK_PORT", "MEMTRACE_LISTEN":
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = append(env, reg.env)
	cmd.ExtraFiles = []*os.File{reg.f}
	b.conv = newConverter(reg, b.out, opts)
	b.conv.prefault(0)
	return b, nil
}

func (b *binRun) start() {
	b.started = true
	go func() {
		// The converter yields to the traced program: on a machine with
		// few CPUs it would otherwise take time from the program it
		// measures. The region absorbs the lag; when it is full the
		// program waits for the converter (never loses records while
		// memtrace lives).
		runtime.LockOSThread()
		_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), converterNice)
		b.conv.run(b.stop)
		close(b.done)
	}()
}

// finish drains the region once the program has exited and completes the
// log; a log that had to take records late is sorted by time afterwards.
func (b *binRun) finish(opts Options) error {
	close(b.stop)
	<-b.done
	b.stop = nil
	err := b.conv.werr
	if b.viewer != nil {
		b.viewer.Close()
		b.viewer = nil
		if err != nil {
			return fmt.Errorf("send the log to the viewer (it left; the program ran on untraced): %w", err)
		}
		return nil
	}
	if b.zw != nil {
		if cerr := b.zw.Close(); err == nil {
			err = cerr
		}
		b.zw = nil
	}
	if b.file != nil {
		if cerr := b.file.Close(); err == nil {
			err = cerr
		}
		b.file = nil
	}
	if err != nil {
		return fmt.Errorf("write the log: %w: check the disk", err)
	}
	if b.conv.late > 0 && opts.Output != "" && !opts.Unordered {
		return SortFile(opts.Output)
	}
	return nil
}

// detach ends the log now, while the program runs on: the library's hooks
// go quiet, what they committed before this moment is written, and the
// summary follows (see converter.finish).
func (b *binRun) detach(opts Options) error {
	b.conv.detachAt = monoNow()
	return b.finish(opts)
}

// close releases what finish did not (Run returning early): the
// converter is stopped before the region is unmapped under it.
func (b *binRun) close() {
	if b.stop != nil {
		close(b.stop)
		if b.started {
			<-b.done
		}
	}
	if b.zw != nil {
		b.zw.Close()
	}
	if b.file != nil {
		b.file.Close()
	}
	if b.viewer != nil {
		b.viewer.Close()
	}
	b.reg.close()
}
