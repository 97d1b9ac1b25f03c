package runner

import "path/filepath"

// OutputKind is where -o sends the log.
type OutputKind uint8

const (
	// OutStderr: no -o, or -o /dev/stderr.
	OutStderr OutputKind = iota
	// OutStdout: -o - or -o /dev/stdout, plain text on memtrace's own
	// stdout (never a file named "-").
	OutStdout
	// OutNone: -o none, no log (with --http or --profile-dir).
	OutNone
	// OutFile: a file (FILE.zst and FILE.gz compressed); Path as given.
	OutFile
)

// NoLog is the -o value that writes no log: with --http or --profile-dir
// the live model is all memtrace keeps. A file of that name is -o ./none.
const NoLog = "none"

// Output is -o, parsed once: every part of a run (the sink, the closing
// lines, --sample's profile, the live model) asks it rather than
// comparing the argument with the magic names.
type Output struct {
	Kind OutputKind
	Path string // OutFile: the file, as given
}

// ParseOutput reads an -o argument ("" when there is none).
func ParseOutput(arg string) Output {
	switch {
	case arg == "" || filepath.Clean(arg) == "/dev/stderr":
		return Output{Kind: OutStderr}
	case arg == "-" || filepath.Clean(arg) == "/dev/stdout":
		return Output{Kind: OutStdout}
	case arg == NoLog:
		return Output{Kind: OutNone}
	}
	return Output{Kind: OutFile, Path: arg}
}

// FileOutput is a log written to path.
func FileOutput(path string) Output { return Output{Kind: OutFile, Path: path} }

// File is the log's file, or "" when it goes to no file.
func (o Output) File() string {
	if o.Kind == OutFile {
		return o.Path
	}
	return ""
}

// String is the output as -o would name it.
func (o Output) String() string {
	switch o.Kind {
	case OutStdout:
		return "-"
	case OutNone:
		return NoLog
	case OutFile:
		return o.Path
	}
	return "/dev/stderr"
}
