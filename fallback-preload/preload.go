package preload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/memtrace/memtrace/internal/logio"
	"github.com/memtrace/memtrace/internal/viewconn"
	"github.com/memtrace/memtrace/launch"
)

// LibName is the library's file name beside the executable and in bin/.
const LibName = "memtrace-preload.so"

// LibEnv names a library to use instead of the embedded one (tests, or a
// library built for another libc).
const LibEnv = "MEMTRACE_PRELOAD_LIB"

// Options are memtrace's options as the library understands them.
type Options struct {
	// Output is the log file; "" writes to stderr.
	Output string
	// Port makes Run wait for one viewer on Listen's address (127.0.0.1
	// by default) before it starts the program, and stream the log to it
	// (in text mode the library itself waits and streams).
	Port int
	// Listen is ADDR:PORT or ADDR; it overrides the loopback default.
	Listen string
	// MinSize drops allocations smaller than this (and their frees).
	MinSize uint64
	// StackDepth is the number of frames captured per event (0 = none).
	StackDepth int
	// StackThreads and TrackThreads are thread-name substrings: only
	// matching threads get stacks / are logged at all.
	StackThreads, TrackThreads []string
	// NoFreeStacks leaves free lines without frames (the library still
	// walks them: only the log is smaller).
	NoFreeStacks bool
	// BufferSize is the per-thread buffer in bytes: 0 keeps the library's
	// default (64 KiB); negative writes every event at once under a global
	// lock (slow, but the file is in time order as it grows).
	BufferSize int
	// Unordered leaves a file log in per-thread order. By default Run
	// sorts a file log by time once the program has exited, so that the
	// file is in global time order as docs/spec.md §2.3 promises.
	Unordered bool
	// Text makes the library format and write the log itself (its
	// drop-in mode, as with LD_PRELOAD and MEMTRACK_OUTPUT) instead of
	// handing binary records to Run through shared memory.
	Text bool
	// SharedMemory is the size in bytes of the region the library writes
	// its records to in binary mode (0: DefaultSharedMemory). It bounds
	// how far the program may run ahead of the conversion to text.
	SharedMemory int
	// Interval writes a snapshot into the log this often, ReportDir a
	// report file per process as it exits (procreport), PeakTopN stacks
	// in each (binary mode: the eBPF path's agent.Session does both).
	Interval  time.Duration
	ReportDir string
	PeakTopN  int
	// Stdin, Stdout and Stderr default to the process's own.
	Stdin  *os.File
	Stdout *os.File
	Stderr *os.File
	// Credential runs the program as another user (with these groups):
	// under sudo, the user behind it, never root. The library file must
	// be readable by that user (the embedded one is).
	Credential *syscall.Credential
	// BaseEnv is the program's environment before the library's
	// settings (nil: memtrace's own); under sudo memtrace gives the
	// user's HOME, USER and LOGNAME.
	BaseEnv []string
	// OpenLog creates Output for the log (default os.Create); memtrace
	// passes one that creates it as the user behind sudo. It is not
	// called when the library writes the log itself as Credential's user.
	OpenLog func(path string) (*os.File, error)
	// OnStacks, when set, is told at the end of a binary-mode run how
	// the library walked its stacks (-v; tests).
	OnStacks func(StackStats)
}

// StackStats says how the library took a run's stacks: over the unwind
// rows memtrace built (Rows), or through glibc's backtrace() where no
// rows covered a frame (Backtrace); the files named and the bytes their
// tables took in the region.
type StackStats struct {
	Rows, Backtrace uint64
	Files, Tables   int
	TableBytes      int
}

// openLog creates the log file through OpenLog, whose errors are its own.
func (o Options) openLog() (*os.File, error) {
	if o.OpenLog != nil {
		return o.OpenLog(o.Output)
	}
	f, err := os.Create(o.Output)
	if err != nil {
		return nil, fmt.Errorf("cannot write the log: %w: check the directory and permissions", err)
	}
	return f, nil
}

// Env returns the environment variables that configure the library for
// opts (without LD_PRELOAD).
func (o Options) Env() ([]string, error) {
	var env []string
	if o.Output != "" {
		abs, err := filepath.Abs(o.Output)
		if err != nil {
			return nil, fmt.Errorf("resolve output path %s: %w", o.Output, err)
		}
		env = append(env, "MEMTRACK_OUTPUT="+abs)
	}
	if o.Port < 0 || o.Port > 65535 {
		return nil, fmt.Errorf("port %d is out of range: use 1-65535", o.Port)
	}
	if o.Listen != "" {
		host, port, hasPort := splitListen(o.Listen)
		if hasPort {
			p, err := strconv.Atoi(port)
			if err != nil || p <= 0 || p > 65535 {
				return nil, fmt.Errorf("bad listen address %q: want ADDR:PORT with a numeric port", o.Listen)
			}
			if o.Port == 0 {
				o.Port = p
			}
		}
		if host == "" {
			host = "0.0.0.0"
		}
		env = append(env, "MEMTRACE_LISTEN="+host+":"+strconv.Itoa(o.Port))
	}
	if o.Port != 0 {
		env = append(env, "MEMTRACK_PORT="+strconv.Itoa(o.Port))
	}
	if o.MinSize > 0 {
		env = append(env, "MEMTRACK_MIN_SIZE="+strconv.FormatUint(o.MinSize, 10))
	}
	if o.StackDepth < 0 {
		return nil, fmt.Errorf("stack depth %d is negative: use 0 (no stacks) or more", o.StackDepth)
	}
	if o.StackDepth > 0 {
		env = append(env, "MEMTRACK_STACK_DEPTH="+strconv.Itoa(o.StackDepth))
	}
	if len(o.StackThreads) > 0 {
		env = append(env, "MEMTRACK_STACK_THREADS="+strings.Join(o.StackThreads, ","))
	}
	if len(o.TrackThreads) > 0 {
		env = append(env, "MEMTRACK_TRACK_THREADS="+strings.Join(o.TrackThreads, ","))
	}
	switch {
	case o.BufferSize < 0:
		env = append(env, "MEMTRACK_BUFFER_SIZE=0")
	case o.BufferSize > 0:
		env = append(env, "MEMTRACK_BUFFER_SIZE="+strconv.Itoa(o.BufferSize))
	}
	return env, nil
}

// splitListen splits "host:port", "[v6]:port", ":port" or "host".
func splitListen(s string) (host, port string, hasPort bool) {
	if strings.HasPrefix(s, "[") {
		if i := strings.Index(s, "]"); i >= 0 {
			host = s[1:i]
			rest := s[i+1:]
			if strings.HasPrefix(rest, ":") {
				return host, rest[1:], true
			}
			return host, "", false
		}
	}
	if strings.Count(s, ":") == 1 {
		i := strings.LastIndex(s, ":")
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// detachGrace is how long a SIGINT or SIGTERM to memtrace waits for the
// program to end before detaching: a Ctrl-C at the terminal reaches both,
// and a program that it ends reports its own status (as in eBPF mode).
const detachGrace = 200 * time.Millisecond

// Run starts argv[0] with the library preloaded, waits for it and returns
// its exit status (128+N when it was killed by signal N). err is non-nil
// only when the program could not be run or its log could not be finished.
//
// SIGINT or SIGTERM to this process detaches (binary mode): the log ends
// with its summary, the program keeps running untraced, and Run returns
// 130 without waiting for it. In text mode, where the library writes the
// log itself, SIGTERM is passed to the program and SIGINT left to it.
func Run(ctx context.Context, opts Options, argv []string) (int, error) {
	if len(argv) == 0 {
		return 2, errors.New("no program given: use memtrace --preload [options] -- PROG ARGS")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return 127, fmt.Errorf("cannot run %s: %w: check the program's path", argv[0], err)
	}
	lib, err := Library()
	if err != nil {
		return 1, err
	}
	env, err := opts.Env()
	if err != nil {
		return 2, err
	}
	binary := !opts.Text
	tcp := opts.Port != 0 || opts.Listen != ""
	if !binary && !tcp && opts.Output != "" && logio.KindOf(opts.Output) != logio.Plain {
		// The library's text mode writes the file itself, as text.
		return 2, fmt.Errorf("cannot write %s: compressed logs (.zst, .gz) need memtrace's own writer, not the library's text mode: drop the suffix, or use binary mode", opts.Output)
	}
	if opts.Output != "" && !tcp && !binary && (opts.OpenLog != nil || opts.Credential == nil) {
		// Fail here, with one line, rather than in the library. (The
		// library, running as Credential's user, creates the file as
		// that user: memtrace must not create it first as root.)
		f, err := opts.openLog()
		if err != nil {
			return 1, err
		}
		f.Close()
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	base := opts.BaseEnv
	if base == nil {
		base = os.Environ()
	}
	cmd.Env = childEnv(base, lib, env)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pick(opts.Stdin, os.Stdin), pick(opts.Stdout, os.Stdout), pick(opts.Stderr, os.Stderr)
	if opts.Credential != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: opts.Credential}
	}
	// The program shares the terminal: a Ctrl-C there reaches it too.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	// After bin.close, the log whole; only for a program that started:
	// a failed start is its one error line.
	started, since := false, time.Now()
	defer func() {
		if started {
			launch.Closing(pick(opts.Stderr, os.Stderr), opts.Output, tcp, since, 0)
		}
	}()
	var bin *binRun
	if binary {
		var viewer net.Conn
		if tcp {
			addr, err := opts.viewerAddr()
			if err != nil {
				return 2, err
			}
			if viewer, err = acceptViewer(addr, pick(opts.Stderr, os.Stderr), sigs); err != nil {
				if errors.Is(err, viewconn.ErrInterrupted) {
					return 130, err
				}
				return 1, err
			}
		}
		bin, err = startBinary(opts, cmd, viewer)
		if err != nil {
			if viewer != nil {
				viewer.Close()
			}
			return 1, err
		}
		defer bin.close()
	}
	if err := cmd.Start(); err != nil {
		status := 127
		if errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.EACCES) {
			status = 126 // a shell's "cannot execute"
		}
		return status, fmt.Errorf("cannot start %s: %w", argv[0], err)
	}
	started = true
	if bin != nil {
		bin.conv.launched(cmd.Process.Pid)
		bin.start()
	}
	exited := make(chan struct{})
	var werr error
	go func() {
		werr = cmd.Wait()
		if bin != nil {
			// Here, not after waitOrDetach: the converter may be
			// holding the exit line for it.
			bin.conv.exited(cmd.Process.Pid, cmd.ProcessState)
		}
		close(exited)
	}()
	if detached := waitOrDetach(ctx, cmd, sigs, exited, bin != nil); detached {
		err := bin.detach(opts)
		fmt.Fprintf(pick(opts.Stderr, os.Stderr), "memtrace: detached; %s (pid %d) keeps running\n", argv[0], cmd.Process.Pid)
		return 130, err
	}
	status := 0
	if werr != nil {
		var ee *exec.ExitError
		if !errors.As(werr, &ee) {
			return 1, fmt.Errorf("wait for %s: %w", argv[0], werr)
		}
		ws, _ := ee.Sys().(syscall.WaitStatus)
		switch {
		case ws.Signaled():
			status = 128 + int(ws.Signal())
		default:
			status = ee.ExitCode()
		}
	}
	if bin != nil {
		return status, bin.finish(opts)
	}
	if opts.Output != "" && !tcp && !opts.Unordered {
		if err := SortFile(opts.Output); err != nil {
			return status, err
		}
	}
	return status, nil
}

// waitOrDetach waits for the program to exit, passing on the signals that
// are the program's, and reports whether a SIGINT or SIGTERM asked to
// detach instead (only when canDetach: binary mode).
func waitOrDetach(ctx context.Context, cmd *exec.Cmd, sigs <-chan os.Signal, exited <-chan struct{}, canDetach bool) bool {
	cancelled := ctx.Done()
	for {
		select {
		case <-exited:
			return false
		case s := <-sigs:
			switch {
			case (s == syscall.SIGINT || s == syscall.SIGTERM) && canDetach:
				select {
				case <-exited:
					return false
				case <-time.After(detachGrace):
					return true
				}
			case s == syscall.SIGINT || s == syscall.SIGQUIT:
				// The terminal sent it to the program as well.
			default:
				_ = cmd.Process.Signal(s)
			}
		case <-cancelled:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			cancelled = nil
		}
	}
}

func pick(f, dflt *os.File) *os.File {
	if f != nil {
		return f
	}
	return dflt
}

// childEnv drops inherited library settings, so that only opts speak, and
// puts the library first in LD_PRELOAD.
func childEnv(base []string, lib string, extra []string) []string {
	var out []string
	preload := lib
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "MEMTRACK_"), k == "MEMTRACE_LISTEN", k == "MEMTRACE_PRELOAD_SESSION", k == ShmEnv:
			continue
		case k == "LD_PRELOAD":
			if v != "" {
				preload += ":" + v
			}
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "LD_PRELOAD="+preload)
	return append(out, extra...)
}

// Library returns the path of a memtrace-preload.so for this machine: $MEMTRACE_PRELOAD_LIB,
// else the embedded one (written once to a per-user cache directory), else
// memtrace-preload.so beside the executable.
func Library() (string, error) {
	if p := os.Getenv(LibEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", LibEnv, p, err)
		}
		return p, nil
	}
	if data, err := fs.ReadFile(libFS, "lib/memtrace-preload-"+runtime.GOARCH+".so"); err == nil {
		return writeCached(data)
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), LibName)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("this memtrace has no preload library for %s: build it with make build (or put %s beside the memtrace binary)", runtime.GOARCH, LibName)
}

// writeCached writes the embedded library to a file named by its hash, in a
// directory only this user can write, so that every run (and every traced
// child process, which needs the path after exec) finds it. Others may
// pass through the directory (not list it): under sudo the program runs as
// the user behind it, whose dynamic linker must open the library.
func writeCached(data []byte) (string, error) {
	sum := sha256.Sum256(data)
	dir := filepath.Join(os.TempDir(), "memtrace-"+strconv.Itoa(os.Getuid()))
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", fmt.Errorf("create %s for the preload library: %w", dir, err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("check %s: %w", dir, err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || !st.IsDir() || int(sys.Uid) != os.Getuid() || st.Mode().Perm()&0o022 != 0 {
		return "", fmt.Errorf("%s is not a private directory of this user: remove it and run again", dir)
	}
	if st.Mode().Perm()&0o011 != 0o011 {
		// Made by an older memtrace, or under a umask that took x.
		if err := os.Chmod(dir, st.Mode().Perm()|0o711); err != nil {
			return "", fmt.Errorf("let others reach the preload library in %s: %w", dir, err)
		}
	}
	p := filepath.Join(dir, "memtrace-preload-"+hex.EncodeToString(sum[:8])+".so")
	if old, err := os.ReadFile(p); err == nil && sha256.Sum256(old) == sum {
		return p, nil
	}
	tmp, err := os.CreateTemp(dir, ".lib-*")
	if err != nil {
		return "", fmt.Errorf("write the preload library: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o755)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), p)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("write the preload library to %s: %w", dir, werr)
	}
	return p, nil
}
