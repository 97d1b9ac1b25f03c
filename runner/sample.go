package runner

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/memtrace/memtrace/internal/asuser"
)

// ProfileSuffix is the -o name that, with --sample, is a pprof profile
// written at the end of the run instead of a log.
const ProfileSuffix = ".pb.gz"

// sampleOutputs checks --sample's outputs: a memtrack log has no way to say
// what a sampled event stands for, so the profiles are the only outputs.
// It returns the -o FILE.pb.gz to write at the end ("" for none) and
// leaves o.Output as NoLog.
func sampleOutputs(o *Options) (string, error) {
	if o.Sample == 0 {
		return "", nil
	}
	if o.Floor {
		return "", errors.New("--sample and --floor: the floor logs nothing to sample; give one of them")
	}
	if o.ReportDir != "" {
		return "", errors.New("--sample and --report-dir: the reports count events, and a sampled run's events are samples without their weights; read the profile instead")
	}
	const why = "--sample: a memtrack log cannot carry the samples' weights; " +
		"write a pprof profile instead: -o FILE.pb.gz (at the end), --http ADDR or --profile-dir DIR (with -o none)"
	switch {
	case o.Listen != "":
		return "", errors.New(why)
	case o.Output.Kind == OutNone:
		return "", nil
	case strings.HasSuffix(o.Output.File(), ProfileSuffix):
		path := o.Output.Path
		o.Output = Output{Kind: OutNone}
		return path, nil
	}
	return "", errors.New(why)
}

// sampled sets the live model up for --sample: the weights, the source's
// count of blocks it could not keep and, for -o FILE.pb.gz, the heaps of
// processes that exit.
func (lr *liveRun) sampled(o *Options, untracked func() uint64, profileOut string) {
	if lr == nil {
		return
	}
	lr.model.Untracked = untracked
	lr.model.SetSampleRate(o.Sample)
	if profileOut != "" {
		lr.model.KeepExited()
	}
}

// tracing notes when tracing began, for /metrics and the profiles.
func (lr *liveRun) tracing(attached bool) {
	if lr != nil {
		lr.model.SetTracedSince(time.Now(), attached)
	}
}

// sampleEnd writes -o FILE.pb.gz and says what --sample could not keep.
func sampleEnd(o *Options, lr *liveRun, profileOut string, untracked uint64, stderr io.Writer) {
	if lr == nil {
		return
	}
	if profileOut != "" {
		if err := writeProfile(lr, profileOut, o.DefaultOutput); err != nil {
			fmt.Fprintf(stderr, "memtrace: %v\n", err)
		} else {
			fmt.Fprintf(stderr, "memtrace: wrote %s (sampled heap profile: go tool pprof %s)\n", profileOut, profileOut)
		}
	}
	if untracked > 0 {
		fmt.Fprintf(stderr, "memtrace: --sample: %d sampled blocks did not fit the kernel side's table (or their process's share of it) and are not in the profiles; raise --sample, --max-samples or --max-proc-samples\n", untracked)
	}
}

func writeProfile(lr *liveRun, path string, chosen bool) error {
	if err := asuser.WriteOutput(path, chosen, lr.prof.WriteProfile); err != nil {
		return fmt.Errorf("-o %s: write the profile: %w", path, unwrapPath(err))
	}
	return nil
}
