package runner

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/memtrace/memtrace/agent"
	"github.com/memtrace/memtrace/internal/asuser"
	"github.com/memtrace/memtrace/live"
)

// liveRun is --http and --profile-dir: the live heap model the agent
// feeds, its endpoint and its periodic profiles.
type liveRun struct {
	model *live.Model
	prof  *live.Profiler
	srv   *live.Server
	stop  chan struct{}
	done  sync.WaitGroup
}

// startLive listens on --http's address and makes --profile-dir (as the
// user behind sudo) before anything is traced, so that a taken port or a
// directory the user cannot write is one line and nothing started. It
// returns nil when neither is asked for. probes is the source's count of
// probe sets for /metrics. The status of a failure is 2 for a directory
// that cannot be made (as --report-dir's), 1 for the port.
func startLive(o *Options, probes func() int, stderr io.Writer) (*liveRun, int, error) {
	if o.HTTP == "" && o.ProfileDir == "" && o.Sample == 0 {
		return nil, 0, nil
	}
	if o.ProfileDir != "" {
		if err := asuser.MkdirAll(o.ProfileDir, 0o755); err != nil {
			return nil, 2, fmt.Errorf("--profile-dir: %w; give a directory you can write (under sudo: the user who ran sudo)", err)
		}
	}
	var ln net.Listener
	if o.HTTP != "" {
		var err error
		if ln, err = live.Listen(o.HTTP); err != nil {
			return nil, 1, err
		}
	}
	lr := &liveRun{model: live.NewModel(), stop: make(chan struct{})}
	lr.model.Probes = probes
	lr.prof = live.NewProfiler(lr.model)
	if ln != nil {
		limits := live.DefaultLimits()
		limits.Logf = func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
		lr.srv = live.ServeLimits(ln, lr.prof, limits)
		// Always said: with port 0 it is the only way to learn the port.
		fmt.Fprintf(stderr, "memtrace: serving http://%s/ (/debug/pprof/heap, /metrics)\n", servedAddr(o.HTTP, ln.Addr()))
		if live.Exposed(ln.Addr()) {
			fmt.Fprintln(stderr, live.ExposedWarning(ln.Addr()))
		}
	}
	if o.ProfileDir != "" {
		interval := o.Interval
		if interval <= 0 {
			interval = time.Minute
		}
		lr.done.Add(1)
		go func() {
			defer lr.done.Done()
			lr.prof.WriteEvery(o.ProfileDir, interval, asuser.WriteRenamed,
				func(err error) { fmt.Fprintf(stderr, "memtrace: %v\n", err) }, lr.stop)
		}()
	}
	return lr, 0, nil
}

// servedAddr is the address --http serves, as the user gave it with the
// port the kernel bound (port 0): the listener's own address names the
// wildcard 0.0.0.0 as [::], since Go listens on both families there.
func servedAddr(given string, bound net.Addr) string {
	addr, err := live.ListenAddr(given)
	tcp, ok := bound.(*net.TCPAddr)
	if err != nil || !ok {
		return bound.String()
	}
	host, _, _ := net.SplitHostPort(addr)
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}

// observer is what the agent is given: nil without --http and
// --profile-dir.
func (lr *liveRun) observer() agent.Observer {
	if lr == nil {
		return nil
	}
	return LiveObserver(lr.model)
}

// LiveObserver is the live model as the agent's Observer: the one
// conversion of the agent's frames to the model's.
func LiveObserver(m *live.Model) agent.Observer { return liveObserver{m} }

type liveObserver struct{ *live.Model }

// Stack copies the frames: the model keeps them, the session reuses its
// own.
func (o liveObserver) Stack(id uint64, frames []agent.Frame) {
	fr := make([]live.Frame, len(frames))
	for i, f := range frames {
		fr[i] = live.Frame(f)
	}
	o.Model.Stack(id, fr)
}

func (lr *liveRun) close() {
	if lr == nil {
		return
	}
	close(lr.stop)
	lr.done.Wait()
	if lr.srv != nil {
		lr.srv.Close()
	}
}
