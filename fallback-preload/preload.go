package preload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/memtrace/memtrace/agent"
	"github.com/memtrace/memtrace/config"
	"github.com/memtrace/memtrace/internal/logio"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/runner"
)

// LibName is the library's file name beside the executable and in bin/.
const LibName = "memtrace-preload.so"

// LibEnv names a library to use instead of the embedded one (tests, or a
// library built for another libc).
const LibEnv = "MEMTRACE_PRELOAD_LIB"

// Options is the run's options; the library reads the shared ones and
// those marked LD_PRELOAD only. OpenLog is not called when the library
// writes the log itself (text mode) as Credential's user.
type Options = runner.Options

// StackStats says how the library took a run's stacks: over the unwind
// rows memtrace built (Rows), or through glibc's backtrace() where no
// rows covered a frame (Backtrace); the frames of the stacks over the rows
// (Frames) and how many of them a thread's walk copied from its previous
// one (Reused); the files named and the bytes their tables took in the
// region; the events whose frames came in the region (Sent) and those
// that named a stack their thread sent before (ByID).
type StackStats struct {
	Rows, Backtrace uint64
	Frames, Reused  uint64
	Sent, ByID      uint64
	Files, Tables   int
	TableBytes      int
}

// openLog creates the log file through OpenLog, whose errors are its own.
func openLog(o *Options) (*os.File, error) {
	if o.OpenLog != nil {
		return o.OpenLog(o.Output.Path)
	}
	return runner.CreateLog(o.Output.Path)
}

// libEnv returns the environment variables that configure the library
// for o (without LD_PRELOAD).
func libEnv(o Options) ([]string, error) {
	var env []string
	switch o.Output.Kind {
	case runner.OutFile:
		abs, err := filepath.Abs(o.Output.Path)
		if err != nil {
			return nil, fmt.Errorf("resolve output path %s: %w", o.Output.Path, err)
		}
		env = append(env, "MEMTRACK_OUTPUT="+abs)
	case runner.OutStdout:
		env = append(env, "MEMTRACK_OUTPUT=/dev/stdout")
	case runner.OutNone:
		env = append(env, "MEMTRACK_OUTPUT=/dev/null")
	}
	if o.Listen != "" {
		host, port, hasPort := splitListen(o.Listen)
		p, err := strconv.Atoi(port)
		if !hasPort || err != nil || p <= 0 || p > 65535 {
			return nil, fmt.Errorf("bad listen address %q: want ADDR:PORT with a port of 1-65535", o.Listen)
		}
		if host == "" {
			host = "0.0.0.0"
		}
		env = append(env, "MEMTRACE_LISTEN="+host+":"+port, "MEMTRACK_PORT="+port)
	}
	if o.MinSize > 0 {
		env = append(env, "MEMTRACK_MIN_SIZE="+strconv.FormatUint(o.MinSize, 10))
	}
	if o.Sample > 0 {
		env = append(env, "MEMTRACE_SAMPLE="+strconv.FormatUint(o.Sample, 10))
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
	if !o.Follow && !o.Text {
		// Only the program started is traced, as on the eBPF path: the
		// library knows it as memtrace's child (c/mt_abi.h, MT_PPID_ENV),
		// which its own execs stay. The drop-in text mode keeps the
		// library's default, memtrack's: children followed.
		env = append(env, "MEMTRACE_FOLLOW=0", ppidEnv+"="+strconv.Itoa(os.Getpid()))
	}
	if o.MmapFiles {
		// The library sends file-backed mappings only when asked: without
		// this, --mmap-files had nothing to log under --preload.
		env = append(env, "MEMTRACE_MMAP_FILES=1")
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
// It is runner.Run with the LD_PRELOAD source (memtrace --preload), or, with
// opts.Text, the library's drop-in mode, where it writes the log itself.
//
// SIGINT or SIGTERM to this process detaches (binary mode): the log ends
// with its summary, the program keeps running untraced, and Run returns
// 130 without waiting for it. In text mode SIGTERM is passed to the
// program and SIGINT left to it. A cancelled ctx sends the program SIGTERM.
func Run(ctx context.Context, opts Options, argv []string) (int, error) {
	if len(argv) == 0 {
		return 2, errors.New("no program given: use memtrace --preload [options] -- PROG ARGS")
	}
	opts.Argv = argv
	if opts.Text {
		return runText(ctx, opts)
	}
	return runner.Run(opts, pick(opts.Stderr, os.Stderr), NewSource(ctx), nil)
}

// Source is the LD_PRELOAD library as a runner.Source: the program
// started with the library preloaded, its records read from the shared
// region into the Session.
type Source struct {
	ctx    context.Context
	o      *Options
	stderr io.Writer
	cmd    *exec.Cmd
	bin    *binRun
	sigs   chan os.Signal
	traced bool
}

// NewSource is the LD_PRELOAD source; a cancelled ctx sends the program
// SIGTERM.
func NewSource(ctx context.Context) *Source {
	if ctx == nil {
		ctx = context.Background()
	}
	return &Source{ctx: ctx}
}

// Start prepares the program: the library, its environment and the
// shared region; the program starts in Trace, once the log is open.
func (s *Source) Start(r *runner.Handle) (int, error) {
	o := r.Options()
	s.o, s.stderr = o, r.Stderr()
	if len(o.Argv) == 0 {
		return 2, errors.New("--preload starts a program (-- PROG); it cannot attach to a running process")
	}
	// The library sees the allocation functions only: descriptors
	// would need hooks on every call that makes or closes one, which it
	// does not have (docs/fd.md). A log without them must not look like
	// a program that opened nothing.
	if o.Track.Any(config.TrackFD | config.TrackDmabuf | config.TrackION) {
		return 2, errors.New("--track fd, dmabuf and ion need the eBPF tracer (the LD_PRELOAD library does not see descriptors): run as root where BPF works, or leave them out of --track")
	}
	// The floor is the eBPF probes' cost: a full trace by the library,
	// with --preload or as the fallback, would be taken for it.
	if o.Floor {
		return 2, errors.New("--floor measures the eBPF probes, and the LD_PRELOAD library has none: run as root where BPF works, without --preload")
	}
	if o.Sample > 0 && o.Text {
		return 2, errors.New("--sample: the library's drop-in text log cannot carry the samples' weights (docs/sampling.md)")
	}
	r.SetMode(logfmt.ModePreload)
	cmd, status, err := command(o)
	if err != nil {
		return status, err
	}
	bin, err := startBinary(*o, cmd)
	if err != nil {
		return 1, err
	}
	s.cmd, s.bin = cmd, bin
	// The program shares the terminal: a Ctrl-C there reaches it too.
	// SIGINT and SIGTERM are the runner's (a detach); these two are
	// the program's.
	s.sigs = make(chan os.Signal, 4)
	signal.Notify(s.sigs, syscall.SIGHUP, syscall.SIGQUIT)
	return 0, nil
}

// command is the program with the library preloaded, as the user and with
// the environment Options give.
func command(o *Options) (*exec.Cmd, int, error) {
	argv := o.Argv
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, 127, fmt.Errorf("cannot run %s: %w: check the program's path", argv[0], err)
	}
	lib, err := Library()
	if err != nil {
		return nil, 1, err
	}
	env, err := libEnv(*o)
	if err != nil {
		return nil, 2, err
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	base := o.BaseEnv
	if base == nil {
		base = os.Environ()
	}
	cmd.Env = childEnv(base, lib, env)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pick(o.Stdin, os.Stdin), pick(o.Stdout, os.Stdout), pick(o.Stderr, os.Stderr)
	if o.Credential != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: o.Credential}
	}
	return cmd, 0, nil
}

// Configure: the events come from inside the traced processes, with
// times from the library's epoch.
func (s *Source) Configure(c *agent.Config) {
	c.InProcess = true
	c.StartNS = 0
}

// Trace starts the program and converts its records until it exits, or
// until a SIGINT or SIGTERM detaches.
func (s *Source) Trace(r *runner.Handle, sess *agent.Session) (int, error) {
	cmd, bin, argv := s.cmd, s.bin, s.o.Argv
	bin.conv = newConverter(bin.reg, sess, s.o.Interval, s.o.StackDepth)
	bin.conv.prog = cmd.Path
	if s.o.Verbose && s.o.StackDepth > 0 {
		bin.conv.onStacks = func(st StackStats) {
			fmt.Fprintf(s.stderr, "memtrace: preload stacks: %d over unwind rows, %d by backtrace(); %d files, %d tables (%d bytes); %d frames of %d reused from the thread's previous walk; %d sent with their frames, %d by id\n",
				st.Rows, st.Backtrace, st.Files, st.Tables, st.TableBytes, st.Reused, st.Frames, st.Sent, st.ByID)
		}
	}
	r.MarkReleased()
	if err := cmd.Start(); err != nil {
		status := 127
		if errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.EACCES) {
			status = 126 // a shell's "cannot execute"
		}
		return status, fmt.Errorf("cannot start %s: %w", argv[0], err)
	}
	s.traced = true
	bin.conv.launched(cmd.Process.Pid)
	bin.start()
	exited := make(chan struct{})
	var werr error
	go func() {
		werr = cmd.Wait()
		r.MarkExited()
		// Here, not after waitOrDetach: the converter may be holding
		// the exit line for it.
		bin.conv.exited(cmd.Process.Pid, cmd.ProcessState)
		close(exited)
	}()
	if detached := waitOrDetach(s.ctx, cmd, s.sigs, runner.Interrupted(), exited); detached {
		bin.detach()
		fmt.Fprintf(s.stderr, "memtrace: detached; %s (pid %d) keeps running\n", argv[0], cmd.Process.Pid)
		return runner.InterruptStatus(), nil
	}
	bin.finish()
	if lost := bin.conv.lost; lost > 0 {
		// As the eBPF path says of its ring: the one knob that helps.
		fmt.Fprintf(s.stderr, "memtrace: %d records lost: the shared region was full (more threads alive at once than it has chunks, or the program far ahead of memtrace); raise --buffer-size\n", lost)
	}
	if werr != nil {
		var ee *exec.ExitError
		if !errors.As(werr, &ee) {
			return 1, fmt.Errorf("wait for %s: %w", argv[0], werr)
		}
		return exitStatus(ee), nil
	}
	return 0, nil
}

// Close releases the region; a file log that had to take records late is
// sorted by time, now that it is closed.
func (s *Source) Close() error {
	signal.Stop(s.sigs)
	s.bin.close()
	o := s.o
	if s.traced && s.bin.conv.late > 0 && o.Output.Kind == runner.OutFile && o.Listen == "" && !o.Unordered {
		return SortFile(o.Output.Path)
	}
	return nil
}

func exitStatus(ee *exec.ExitError) int {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}

// runText is the library's drop-in mode: it formats and writes the log
// (or serves it) itself; memtrace only starts the program and waits.
func runText(ctx context.Context, opts Options) (int, error) {
	argv := opts.Argv
	tcp := opts.Listen != ""
	if !tcp && opts.Output.Kind == runner.OutFile && logio.KindOf(opts.Output.Path) != logio.Plain {
		// The library's text mode writes the file itself, as text.
		return 2, fmt.Errorf("cannot write %s: compressed logs (.zst, .gz) need memtrace's own writer, not the library's text mode: drop the suffix, or use binary mode", opts.Output.Path)
	}
	cmd, status, err := command(&opts)
	if err != nil {
		return status, err
	}
	if opts.Output.Kind == runner.OutFile && !tcp && (opts.OpenLog != nil || opts.Credential == nil) {
		// Fail here, with one line, rather than in the library. (The
		// library, running as Credential's user, creates the file as
		// that user: memtrace must not create it first as root.)
		f, err := openLog(&opts)
		if err != nil {
			return 1, err
		}
		f.Close()
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		status := 127
		if errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.EACCES) {
			status = 126 // a shell's "cannot execute"
		}
		return status, fmt.Errorf("cannot start %s: %w", argv[0], err)
	}
	since := time.Now()
	exited := make(chan struct{})
	var werr error
	go func() {
		werr = cmd.Wait()
		close(exited)
	}()
	waitOrDetach(ctx, cmd, sigs, nil, exited)
	runner.ClosingFromLog(pick(opts.Stderr, os.Stderr), opts.Output, tcp, since, nil)
	status = 0
	if werr != nil {
		var ee *exec.ExitError
		if !errors.As(werr, &ee) {
			return 1, fmt.Errorf("wait for %s: %w", argv[0], werr)
		}
		status = exitStatus(ee)
	}
	if opts.Output.Kind == runner.OutFile && !tcp && !opts.Unordered {
		if err := SortFile(opts.Output.Path); err != nil {
			return status, err
		}
	}
	return status, nil
}

// waitOrDetach waits for the program to exit, passing on the signals that
// are the program's, and reports whether interrupt (a SIGINT or SIGTERM to
// memtrace; nil in text mode, where they come on sigs) asked to detach.
func waitOrDetach(ctx context.Context, cmd *exec.Cmd, sigs <-chan os.Signal, interrupt <-chan struct{}, exited <-chan struct{}) bool {
	cancelled := ctx.Done()
	for {
		select {
		case <-exited:
			return false
		case <-interrupt:
			select {
			case <-exited:
				return false
			case <-time.After(detachGrace):
				return true
			}
		case s := <-sigs:
			switch {
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
		case strings.HasPrefix(k, "MEMTRACK_"), k == "MEMTRACE_LISTEN", k == "MEMTRACE_PRELOAD_SESSION", k == ShmEnv, k == "MEMTRACE_SAMPLE", k == "MEMTRACE_MMAP_FILES",
			k == "MEMTRACE_FOLLOW", k == ppidEnv:
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
// else the installed one (make install: PREFIX/lib/memtrace/ beside
// PREFIX/bin/memtrace), else the embedded one (written once to a per-user
// cache directory), else memtrace-preload.so beside the executable.
func Library() (string, error) {
	if p := os.Getenv(LibEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", LibEnv, p, err)
		}
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		// Installed, it is every user's to read and needs no cache.
		p := filepath.Join(filepath.Dir(exe), "..", "lib", "memtrace", LibName)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return filepath.Clean(p), nil
		}
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
