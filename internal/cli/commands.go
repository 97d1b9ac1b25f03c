package cli

import (
	"strings"

	"github.com/memtrace/memtrace/internal/ranking"
)

// helpFlag and versionFlag are every command's; the parser answers them
// with ErrHelp and ErrVersion.
var (
	helpFlag    = Flag{Names: []string{"help", "h"}, Help: "print this help and exit"}
	versionFlag = Flag{Names: []string{"version"}, Help: "print the version and exit"}
)

// Memtrace is the table of `memtrace`.
var Memtrace = &Command{
	Name:    "memtrace",
	ManName: "memtrace",
	Summary: "trace the heap of a Linux program with eBPF or LD_PRELOAD",
	Synopsis: []string{
		"memtrace [options] -- PROG [ARGS...]  trace PROG from its start",
		"memtrace [options] -p PID[,PID...]     attach to running processes",
		"memtrace [options] --comm NAME ...     every process named NAME",
		"memtrace --preload [options] -- PROG   LD_PRELOAD: no BPF, no root",
		"memtrace report [options] LOG...       rank a log's call stacks (--help)",
		"memtrace --version",
	},
	Description: "memtrace writes every allocation and free of the traced processes, with their call stacks, as memtrack-format log lines. Open the log with memview, or rank it with memtrace report.",
	Sections:    []string{"", "what is traced", "output", "eBPF"},
	Flags: []Flag{
		{Names: []string{"p"}, Arg: "PID[,PID...]", Help: "attach to running processes", Complete: "pid"},
		{Names: []string{"comm"}, Arg: "NAME", Repeatable: true, Help: "trace every process named NAME (its comm, at most 15 bytes): those running, and each that execs, until Ctrl-C; profiles only (docs/fleet.md)", Complete: "command"},
		{Names: []string{"cgroup"}, Arg: "PATH", Repeatable: true, Help: "trace every process in the cgroup v2 directory PATH or below it (as --comm)", Complete: "dir"},
		{Names: []string{"all"}, Help: "trace every process of the host that has an allocator to probe (as --comm)"},
		{Names: []string{"max-procs"}, Arg: "N", Default: "256", Help: "with --comm, --cgroup, --all: trace at most N processes at once; the others are counted in /metrics"},
		{Names: []string{"max-samples"}, Arg: "N", Section: "what is traced", Default: "1048576", Help: "with --sample: the kernel side keeps at most N live sampled blocks in all (about 100 bytes each); one more is counted in /metrics, not kept"},
		{Names: []string{"max-proc-samples"}, Arg: "N", Section: "what is traced", Help: "with --sample: each process keeps at most N live sampled blocks (default: a quarter of --max-samples with --comm, --cgroup or --all, else no bound of its own); one more is counted in /metrics, not kept"},
		{Names: []string{"follow", "f"}, Help: "also trace the processes the targets fork, and the programs they exec (-f is memtrace's --follow: children, not a file)"},
		{Names: []string{"preload"}, Help: "use the LD_PRELOAD library instead of eBPF"},
		{Names: []string{"config"}, Arg: "FILE", Help: "read settings from FILE (mem_monitor's keys; flags over MEMTRACE_* variables over the file)", Complete: "file"},
		{Names: []string{"v"}, Help: "say where each probe went and each --report-dir file written; at the end, the BPF programs' runs and times, memtrace's own CPU and the run's phases"},
		helpFlag,
		versionFlag,

		{Names: []string{"track"}, Arg: "LIST", Section: "what is traced", Default: "malloc,mmap", Help: "what to trace: a comma-separated LIST of malloc, mmap, fd, dmabuf, ion", Complete: "malloc mmap fd dmabuf ion"},
		{Names: []string{"mmap-files"}, Section: "what is traced", Help: "log file-backed mmaps too"},
		{Names: []string{"min-size"}, Arg: "N", Section: "what is traced", Help: "do not log allocations smaller than N bytes (K/M/G suffixes, 1024-based)"},
		{Names: []string{"sample"}, Arg: "BYTES", Section: "what is traced", Help: "sample one allocation per BYTES on average (K/M/G suffixes, 1024-based; at most 1G): a heap profile cheap enough to leave on, not a log (-o FILE.pb.gz, --http, --profile-dir; docs/sampling.md)"},
		{Names: []string{"stack-depth"}, Arg: "N", Section: "what is traced", Default: "64", Help: "capture N call-stack frames per event (1-127; 0: none)"},
		{Names: []string{"stack-threads"}, Arg: "a,b", Section: "what is traced", Help: "capture stacks only in threads whose name contains one of a,b"},
		{Names: []string{"no-free-stacks"}, Section: "what is traced", Help: "frees carry no stack: with --stack-depth only allocations walk theirs"},
		{Names: []string{"track-threads"}, Arg: "a,b", Section: "what is traced", Help: "log only threads whose name contains one of a,b"},
		{Names: []string{"stack-unwind"}, Arg: "dwarf|fp", Section: "what is traced", Default: "dwarf", Help: "walk stacks with the files' unwind tables (dwarf) or with frame pointers only (fp)", Complete: "dwarf fp"},

		{Names: []string{"o"}, Arg: "FILE", Section: "output", Help: "write the log to FILE (default memtrace.PROG.PID.log.zst in the current directory, memtrace.PROG.PID.pb.gz with --sample; FILE.zst, FILE.gz: compressed; -: stdout; /dev/stderr; none: no log, with --http or --profile-dir)", Complete: "file"},
		{Names: []string{"port"}, Arg: "PORT", Section: "output", Help: "serve the log over TCP on 127.0.0.1:PORT; in -- mode PROG starts once a client connects"},
		{Names: []string{"listen"}, Arg: "ADDR:PORT", Section: "output", Help: "serve the log over TCP on ADDR:PORT"},
		{Names: []string{"http"}, Arg: "ADDR:PORT", Section: "output", Help: "serve the live heap on ADDR:PORT (a port alone: 127.0.0.1): /debug/pprof/heap, /metrics"},
		{Names: []string{"profile-dir"}, Arg: "DIR", Section: "output", Help: "write a heap profile (heap-TIME.pb.gz, TIME in UTC as --report-dir's) into DIR every --interval (default 1m)", Complete: "dir"},
		{Names: []string{"report-dir"}, Arg: "DIR", Section: "output", Help: "write COMM-PID_TIME.txt and .html per process into DIR as each exits (COMM its name, TIME the report's in UTC: grow-25958_20260102T150405.000Z.txt)", Complete: "dir"},
		{Names: []string{"interval"}, Arg: "DURATION", Section: "output", Help: "write a snapshot (current, peak, top live stacks, open fds) into the log every DURATION (10s, 1m)"},
		{Names: []string{"peak-top-n"}, Arg: "N", Section: "output", Default: "10", Help: "call stacks in snapshots and per-process reports"},
		{Names: []string{"buffer-size"}, Arg: "SIZE", Section: "output", Help: "how far the program may run ahead of memtrace: the eBPF ring buffer (default 32M; 4M for --sample with --comm, --cgroup or --all), or with --preload the shared region, which also bounds the threads alive at once (default 256M, about 4,800 threads); a power of two from 4K to 1G, K/M/G suffixes"},

		{Names: []string{"no-uprobe-multi"}, Section: "eBPF", Help: "use classic uprobe links even where uprobe_multi exists"},
		{Names: []string{"floor"}, Section: "eBPF", Help: "benchmark baseline: attach empty probes on the same points, log nothing"},
	},
	ManSections: []ManSection{
		{"Output files", "Under sudo every file memtrace writes (the log, the --report-dir and --profile-dir files, a --sample profile) is created as the user who ran sudo, with that user's rights. " +
			"As root without sudo, a symbolic link at the end of an output's path is followed only if root owns it and its directory is root's and writable by no one else, or sticky (as /tmp); " +
			"any other link is refused in one line that names the path, and the file it points at is left alone. " +
			"Names memtrace chooses (memtrace.PROG.PID.log.zst, the --report-dir files, the --profile-dir files' temporary names) are only ever created, never written over. " +
			"-o -, none, /dev/stdout, /dev/stderr and /dev/fd/N name memtrace's own descriptors. " +
			"A report or profile whose write fails (a full disk) is removed, not left partial."},
	},
	Examples: []Item{
		{"memtrace -- ./server --port 8080", "Trace ./server from its start, with eBPF as root (an ordinary user gets LD_PRELOAD); the log is memtrace.server.PID.log.zst in the current directory, and memtrace ends with the program, with its status."},
		{"memview memtrace.server.4242.log.zst", "Browse the log; memtrace report ranks it (memtrace-report(1))."},
		{"sudo memtrace -p 4242 -o server.log.zst", "Attach to a running process; Ctrl-C detaches and leaves it running."},
		{"memtrace --preload -o run.log -- ./test --quick", "Trace with the LD_PRELOAD library: no BPF, no root."},
		{"memtrace --report-dir reports --follow -- make -j4", "Write a text and an HTML report per process into reports/ as each exits, children included; memtrace report --aggregate reports sums them up."},
		{"sudo memtrace -p 4242 -o none --http 6060", "Serve the live heap on 127.0.0.1:6060 instead of writing a log: go tool pprof http://127.0.0.1:6060/debug/pprof/heap."},
		{"sudo memtrace --comm myservice --sample 512K -o none --http 127.0.0.1:6060", "Profile every process named myservice, those running and those that start, with one allocation sampled per 512K on average (docs/sampling.md)."},
	},
	ExitStatus: []Item{
		{"status of PROG", "when memtrace started PROG: PROG's exit status, 128+N when signal N ended it, 130 when Ctrl-C detached and PROG runs on. A log that cannot be written once PROG runs does not change it."},
		{"0", "-p, --comm, --cgroup, --all: the tracing ended (Ctrl-C, SIGTERM, the processes exited); --help, --version."},
		{"1", "the log cannot be created (a missing directory, a directory, no permission, a refused symbolic link, a file already under the default name); -p names no process or one memtrace may not attach to; the --http port is taken; with -p, the log cannot be written."},
		{"2", "a bad command line, config file or MEMTRACE_* variable; a --report-dir or --profile-dir that cannot be made or written."},
		{"126", "PROG is not executable, or not a format the kernel runs."},
		{"127", "PROG is not found; also when the first word looks like a typo of report (one line names it)."},
	},
	Environment: []Item{
		{"MEMTRACE_CONFIG", "the config file to read when --config is not given (docs/config.md)."},
		{"MEMTRACE_TRACK, MEMTRACE_STACK_DEPTH, MEMTRACE_REPORT_DIR, MEMTRACE_SNAPSHOT_INTERVAL_MS, MEMTRACE_PEAK_TOP_N, MEMTRACE_MIN_ALLOC", "mem_monitor's settings: --track, --stack-depth, --report-dir, --interval in milliseconds, --peak-top-n, --min-size. They override the config file; a flag overrides them; an empty one counts as unset."},
		{"MEMTRACE_PRELOAD_LIB", "the LD_PRELOAD library to use instead of the installed one or the one built into memtrace."},
		{"MEMTRACE_CPUPROFILE", "write a CPU profile of memtrace itself (memtrace and memtrace report) to this file."},
		{"SUDO_UID, SUDO_GID", "under sudo, PROG runs as this user, with their groups, HOME, USER and LOGNAME, and every file memtrace reads or writes for the user is opened as them."},
		{"PATH", "where PROG is looked for when it names no directory."},
		{"TMPDIR", "where the preload library built into memtrace is written (memtrace-UID/) when none is installed."},
	},
	Files: []Item{
		{"memtrace.PROG.PID.log.zst", "the log when -o gives none, in the current directory (memtrace.PROG.PID.pb.gz with --sample); never written over."},
		{"DIR/COMM-PID_TIME.txt, DIR/COMM-PID_TIME.html", "--report-dir's report of each process (TIME in UTC, as 20260102T150405.000Z)."},
		{"DIR/heap-TIME.pb.gz", "--profile-dir's heap profiles."},
		{"PREFIX/lib/memtrace/memtrace-preload.so", "the installed LD_PRELOAD library, found beside PREFIX/bin/memtrace."},
		{"PREFIX/" + DocDir + "/", "the topic documents the options name (cli.md, spec.md, live.md, fleet.md, sampling.md, config.md and the others; docs/ in the source), installed by make install."},
	},
	Footer:  "memtrace report --help lists the report's options. More in man memtrace and in docs/cli.md, docs/spec.md (" + DocDir + " under the install prefix).",
	Operand: "command",
	SeeAlso: []string{"memview(1)", "memtrace-report(1)"},
}

// Memview is the table of `memview`.
var Memview = &Command{
	Name:    "memview",
	ManName: "memview",
	Summary: "browse a memtrace or memtrack log in the terminal",
	Synopsis: []string{
		"memview LOG",
		"memview -f LOG | -f -",
		"memview [HOST]:PORT [-o FILE]",
		"memview --dump-threads LOG",
	},
	Description: "LOG is a memtrace or memtrack log, plain or zstd/gzip-compressed. [HOST]:PORT connects to a memtrace --port or a memtrack.so MEMTRACK_PORT stream. Press ? inside memview for the keys.",
	Flags: []Flag{
		{Names: []string{"follow", "f"}, Arg: "LOG", Help: "follow LOG as it grows (refresh every 250 ms); -f - follows a log on stdin (-f is memview's follow: a file, as tail -f)", Complete: "file"},
		{Names: []string{"save", "o"}, Arg: "FILE", Help: "with a [HOST]:PORT stream: also save it to FILE (FILE.zst, FILE.gz: compressed)", Complete: "file"},
		{Names: []string{"dump-threads"}, Arg: "LOG", Help: "print the per-thread table (memtrack's memview --dump-threads) and exit", Complete: "file"},
		{Names: []string{"disable-builtin-suppressions"}, Help: "count what system libraries keep for good (libstdc++'s exception pool, glibc's internals) as leaks too"},
		helpFlag,
		versionFlag,
		{Names: []string{"load-stats"}, Arg: "LOG", Hidden: true, Help: "benchmark: load LOG and print the time and memory"},
		{Names: []string{"follow-bench"}, Arg: "LOG", Hidden: true, Help: "benchmark: follow LOG and print when it caught up"},
	},
	Footer: "More in man memview and in docs/memview.md (" + DocDir + " under the install prefix).",
	Examples: []Item{
		{"memview memtrace.server.4242.log.zst", "Browse a log memtrace wrote; press ? for the keys."},
		{"memview -f run.log", "Follow run.log as memtrace -o run.log writes it."},
		{"memtrace --port 7000 -- ./server & memview :7000 -o server.log.zst", "Watch a run as it happens (./server starts once memview connects) and keep a compressed copy of the stream."},
		{"memview --dump-threads run.log", "Print the per-thread table and exit."},
	},
	ExitStatus: []Item{
		{"0", "memview was quit (q), or --dump-threads, --help or --version printed."},
		{"1", "the log cannot be opened or read, or the stream cannot be reached or saved."},
		{"2", "a bad command line."},
	},
	Environment: []Item{
		{"TERM", "the terminal memview draws on."},
		{"GOGC", "the Go collector's setting; unset, memview collects at 50, which keeps its memory near the log's model."},
		{"SUDO_UID, SUDO_GID", "under sudo, the log is read and -o's copy and W's export are written as this user."},
	},
	Files: []Item{
		{"memview-export.txt", "W's default export, in the current directory."},
		{"PREFIX/" + DocDir + "/memview.md", "the keys, panes and filters at length (docs/ in the source), installed by make install."},
	},
	Interspersed: true,
	Operand:      "file",
	SeeAlso:      []string{"memtrace(1)", "memtrace-report(1)"},
}

// Report is the table of `memtrace report`.
var Report = &Command{
	Name:    "memtrace report",
	ManName: "memtrace-report",
	Summary: "rank the call stacks of memtrace logs, like heaptrack_print",
	Synopsis: []string{
		"memtrace report [options] LOG...",
		"memtrace report --aggregate DIR [--output-prefix P]",
	},
	Description: "Rank the call stacks of memtrace (or memtrack) logs by allocation calls, memory live at the peak, leaks and temporary allocations, like heaptrack_print. Several logs (or a log of several processes) give a section per process and a merged one. A LOG may be compressed (zstd, gzip); - reads stdin.\n\nThe on/off options take 1/0, true/false, on/off, yes/no, after = or as the next argument; alone they mean on.",
	Sections:    []string{"rankings", "input", "comparison and leaks", "exports (FILE - writes to stdout instead of the text report)", "mem_monitor"},
	Flags: append(rankingFlags(), []Flag{
		{Names: []string{"peak-limit", "n"}, Arg: "N", Default: "10", Help: "entries per ranking (0: all)"},
		{Names: []string{"sub-peak-limit", "s"}, Arg: "N", Default: "5", Help: "call stacks shown under each entry (heaptrack's sub-peaks)"},
		{Names: []string{"merge-backtraces", "m"}, Arg: "0|1", OptionalArg: true, Help: "1: one frame per function, so that builds compare; 0 (default): call sites, each named by its innermost inlined function and file:line"},
		{Names: []string{"resolve"}, Arg: "0|1", OptionalArg: true, Help: "names of unnamed frames and file:line, from the modules the log names (on)"},
		{Names: []string{"full-stacks"}, Arg: "0|1", OptionalArg: true, Help: "stacks go on past main (or a thread's start routine) into the C library's start-up code"},
		{Names: []string{"shorten-templates", "t"}, Arg: "0|1", OptionalArg: true, Help: "C++ template arguments left out: std::vector<> (on; --full-names is -t 0)"},
		{Names: []string{"full-names"}, Arg: "0|1", OptionalArg: true, Help: "keep C++ template arguments in function names (-t 0)"},
		helpFlag,
		versionFlag,

		{Names: []string{"file", "f"}, Repeatable: true, Arg: "LOG", Section: "input", Help: "read LOG, as an operand would be (heaptrack_print's -f; repeatable)", Complete: "file"},
		{Names: []string{"pid"}, Arg: "PID[,PID...]", Section: "input", Help: "only these processes"},
		{Names: []string{"filter-bt-function"}, Arg: "NAME", Section: "input", Help: "only stacks with a function containing NAME"},
		{Names: []string{"progress"}, Arg: "auto|1|0", Section: "input", Default: "auto", Help: "progress line on stderr (auto: on a terminal)", Complete: "auto 1 0"},

		{Names: []string{"diff", "d"}, Repeatable: true, Arg: "BASE.log", Section: "comparison and leaks", Help: "print LOG minus BASE (repeatable: bases add up)", Complete: "file"},
		{Names: []string{"suppressions"}, Repeatable: true, Arg: "FILE", Section: "comparison and leaks", Help: "leak:PATTERN lines (repeatable)", Complete: "file"},
		{Names: []string{"print-suppressions"}, Arg: "0|1", OptionalArg: true, Section: "comparison and leaks", Help: "what each suppression matched and the bytes suppressed"},
		{Names: []string{"disable-builtin-suppressions"}, Arg: "0|1", OptionalArg: true, Section: "comparison and leaks", Help: "report what system libraries keep for good (libstdc++'s exception pool, glibc's and the loader's internals) as leaks too"},

		{Names: []string{"json"}, Arg: "FILE", Section: "exports (FILE - writes to stdout instead of the text report)", Help: "figures and rankings for automation", Complete: "file"},
		{Names: []string{"folded", "F", "print-flamegraph"}, Arg: "FILE", Section: "exports (FILE - writes to stdout instead of the text report)", Help: "folded stacks (flamegraph.pl, speedscope, inferno)", Complete: "file"},
		{Names: []string{"cost", "flamegraph-cost-type"}, Arg: flameCosts("|"), Section: "exports (FILE - writes to stdout instead of the text report)", Default: ranking.FlameCosts[0].Name, Help: "cost of --folded and of the HTML's first flame graph", Complete: flameCosts(" ")},
		{Names: []string{"massif", "M", "print-massif"}, Arg: "FILE", Section: "exports (FILE - writes to stdout instead of the text report)", Help: "valgrind massif format (ms_print)", Complete: "file"},
		{Names: []string{"massif-threshold"}, Arg: "PERCENT", Section: "exports (FILE - writes to stdout instead of the text report)", Default: "1", Help: "fold smaller stacks in massif trees"},
		{Names: []string{"massif-detailed-freq"}, Arg: "N", Section: "exports (FILE - writes to stdout instead of the text report)", Default: "2", Help: "every Nth massif snapshot detailed (0: none but the peak)"},
		{Names: []string{"pprof"}, Arg: "FILE", Section: "exports (FILE - writes to stdout instead of the text report)", Help: "gzipped profile.proto (go tool pprof)", Complete: "file"},
		{Names: []string{"html"}, Arg: "FILE", Section: "exports (FILE - writes to stdout instead of the text report)", Help: "one self-contained HTML page", Complete: "file"},

		{Names: []string{"aggregate"}, Arg: "DIR", Section: "mem_monitor", Help: "merge the per-process reports memtrace --report-dir wrote into DIR/P.txt and DIR/P.html, and print the text", Complete: "dir"},
		{Names: []string{"output-prefix"}, Arg: "P", Section: "mem_monitor", Default: "memtrace_summary", Help: "with --aggregate: the summary's file name"},
	}...),
	Footer: "More in man memtrace-report; the definitions in docs/report.md (" + DocDir + " under the install prefix).",
	Examples: []Item{
		{"memtrace report memtrace.server.4242.log.zst", "Rank the log's call stacks by calls, memory live at the peak, leaks and temporary allocations, and sum it up."},
		{"memtrace report -n 20 -l 0 run.log", "Twenty entries per ranking, and no leak ranking."},
		{"memtrace report -d before.log after.log", "What after.log allocated, held at the peak and leaked more than before.log."},
		{"memtrace report --html run.html run.log", "One self-contained HTML page: charts, flame graphs, call trees, the rankings."},
		{"memtrace report --folded - --cost peak run.log | flamegraph.pl --countname bytes > peak.svg", "A flame graph of the memory live at the peak."},
		{"memtrace report --aggregate reports", "Sum up the per-process reports memtrace --report-dir reports wrote into reports/memtrace_summary.txt and .html."},
	},
	ExitStatus: []Item{
		{"0", "the report was written (also when a log holds no allocation)."},
		{"1", "a log cannot be read, or stops being readable (the report of what came before is written), or an export cannot be written."},
		{"2", "a bad command line."},
	},
	Environment: []Item{
		{"GOGC", "the Go collector's setting; a lower one than the report's own is kept."},
		{"SUDO_UID, SUDO_GID", "under sudo, the logs are read and the exports written as this user."},
		{"MEMTRACE_CPUPROFILE", "write a CPU profile of the report itself to this file."},
	},
	Files: []Item{
		{"DIR/memtrace_summary.txt, DIR/memtrace_summary.html", "--aggregate's summary (--output-prefix names it)."},
		{"PREFIX/" + DocDir + "/report.md", "the definitions of every figure and the formats of the exports (docs/ in the source), installed by make install."},
	},
	Interspersed: true,
	Operand:      "file",
	SeeAlso:      []string{"memtrace(1)", "memview(1)"},
}

// rankingFlags are the switches of the report's rankings, one per row of
// ranking.Rankings.
func rankingFlags() []Flag {
	var out []Flag
	for _, r := range ranking.Rankings {
		names := []string{r.Flag}
		if r.Short != "" {
			names = append(names, r.Short)
		}
		state := " (off)"
		if r.On {
			state = " (on)"
		}
		out = append(out, Flag{Names: names, Arg: "0|1", OptionalArg: true, Help: r.Help + state})
	}
	return out
}

// flameCosts are --cost's values, joined by sep.
func flameCosts(sep string) string {
	var names []string
	for _, c := range ranking.FlameCosts {
		names = append(names, c.Name)
	}
	return strings.Join(names, sep)
}

// Commands are the three tables, in the order the generator writes them.
var Commands = []*Command{Memtrace, Memview, Report}
