package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseTrack(t *testing.T) {
	good := map[string]Track{
		"malloc":                    TrackMalloc,
		"malloc,mmap,fd":            TrackMalloc | TrackMmap | TrackFD,
		" fd , dmabuf ,ion":         TrackFD | TrackDmabuf | TrackION,
		"malloc,mmap,fd,dmabuf,ion": trackAll,
		"ion,ion":                   TrackION,
	}
	for in, want := range good {
		got, err := ParseTrack(in)
		if err != nil || got != want {
			t.Errorf("ParseTrack(%q) = %v, %v; want %v", in, got, err, want)
		}
		if back, err := ParseTrack(got.String()); err != nil || back != got {
			t.Errorf("ParseTrack(%q.String() = %q) = %v, %v", in, got.String(), back, err)
		}
	}
	bad := map[string]string{
		"":            "empty track list",
		"malloc,,fd":  "empty word",
		"malloc,fds":  `unknown track word "fds"`,
		"MALLOC":      `unknown track word "MALLOC"`,
		"malloc;mmap": `unknown track word "malloc;mmap"`,
	}
	for in, want := range bad {
		_, err := ParseTrack(in)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), TrackWords) {
			t.Errorf("ParseTrack(%q) error %v; want one containing %q and the word list", in, err, want)
		}
	}
}

// The example from mem_monitor's README, with its comment.
const memmonExample = `# /data/local/tmp/memmon.cfg
track=malloc,mmap,fd,dmabuf,ion
stack_depth=24
report_dir=/data/local/tmp/memmon
snapshot_interval_ms=10000
peak_top_n=64
min_alloc=128
`

func TestParseExample(t *testing.T) {
	s, err := Parse("memmon.cfg", []byte(memmonExample))
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{Track: trackAll, StackDepth: 24, ReportDir: "/data/local/tmp/memmon",
		SnapshotIntervalMS: 10000, PeakTopN: 64, MinAlloc: 128,
		Origin: map[string]string{"track": "memmon.cfg:2", "stack_depth": "memmon.cfg:3", "report_dir": "memmon.cfg:4",
			"snapshot_interval_ms": "memmon.cfg:5", "peak_top_n": "memmon.cfg:6", "min_alloc": "memmon.cfg:7"}}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got %+v\nwant %+v", s, want)
	}
}

func TestParseLayout(t *testing.T) {
	in := "\xef\xbb\xbf  # comment\r\n\n\t stack_depth = 8 \r\n  #track=bogus\nmin_alloc=4K\nreport_dir = /tmp/a b#c\n"
	s, err := Parse("x.cfg", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if s.StackDepth != 8 || s.MinAlloc != 4096 || s.ReportDir != "/tmp/a b#c" || s.Track != 0 {
		t.Fatalf("got %+v", s)
	}
	if s.Origin["stack_depth"] != "x.cfg:3" || s.Origin["min_alloc"] != "x.cfg:5" {
		t.Fatalf("origins %v", s.Origin)
	}
	if _, ok := s.Origin["track"]; ok {
		t.Fatal("a commented-out key counted as set")
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{"track=malloc\nstack_dpeth=3\n", `f.cfg:2: unknown key "stack_dpeth"; the keys are track, stack_depth`},
		{"stack_depth=abc", `f.cfg:1: bad stack_depth value: want a whole number from 0 to 127; fix the value`},
		{"stack_depth=128", `want a whole number from 0 to 127`},
		{"stack_depth=-1", `want a whole number`},
		{"\n\npeak_top_n=", `f.cfg:3: bad peak_top_n value: want a whole number`},
		{"track=malloc,heap", `f.cfg:1: bad track value: want a comma-separated list of malloc,mmap,fd,dmabuf,ion`},
		{"min_alloc=12Q", `want a byte count`},
		{"min_alloc=99999999999999999999", `want a byte count`},
		{"report_dir=", `bad report_dir value: empty directory`},
		{"just words", `f.cfg: line 1 is not key=value`},
		{"# c\n\n  just words", `f.cfg: line 3 is not key=value`},
		{"$6$salt/hash=1", `f.cfg:1: unknown key (not shown: not a short name); the keys are track`},
		{strings.Repeat("k", 33) + "=1", `f.cfg:1: unknown key (not shown: not a short name)`},
		{strings.Repeat("k", 32) + "=1", `f.cfg:1: unknown key "` + strings.Repeat("k", 32) + `"`},
		{"track=fd\ntrack=ion", `f.cfg:2: track is set again (first at f.cfg:1)`},
		{"snapshot_interval_ms=86400001", `from 0 to 86400000`},
	}
	for _, c := range cases {
		_, err := Parse("f.cfg", []byte(c.in))
		if err == nil {
			t.Errorf("%q: no error", c.in)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "config file f.cfg:") {
			t.Errorf("%q: error %q; want one line with %q", c.in, msg, c.want)
		}
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "memtrace.cfg")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadPrecedence(t *testing.T) {
	file := writeFile(t, "track=fd\nstack_depth=24\nreport_dir=/from/file\npeak_top_n=5\n")
	env := []string{
		"MEMTRACE_STACK_DEPTH=32",
		"MEMTRACE_REPORT_DIR=/from/env",
		"MEMTRACE_MIN_ALLOC=", // empty: unset
		"HOME=/root",
		"MEMTRACE_UNRELATED=1",
	}
	s, err := Load(file, env)
	if err != nil {
		t.Fatal(err)
	}
	if s.Track != TrackFD || s.StackDepth != 32 || s.ReportDir != "/from/env" || s.PeakTopN != 5 || s.MinAlloc != 0 {
		t.Fatalf("file+env: %+v", s)
	}
	if s.Origin["stack_depth"] != "MEMTRACE_STACK_DEPTH" || s.Origin["track"] != file+":1" {
		t.Fatalf("origins %v", s.Origin)
	}
	if _, ok := s.Origin["min_alloc"]; ok {
		t.Fatal("an empty variable counted as set")
	}

	// The flags: --stack-depth given, --report-dir left at its default,
	// --min-size default 0, --track not given.
	flags := Settings{Track: DefaultTrack, StackDepth: 7, ReportDir: ".", PeakTopN: 10, MinAlloc: 0}
	m := Merge(s, flags, map[string]bool{"stack-depth": true, "report_dir": false})
	want := Settings{Track: TrackFD, StackDepth: 7, ReportDir: "/from/env", PeakTopN: 5, MinAlloc: 0, SnapshotIntervalMS: 0}
	m.Origin = nil
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("merge: got %+v want %+v", m, want)
	}
	m = Merge(s, flags, map[string]bool{"--track": true, "min_alloc": true})
	if m.Track != DefaultTrack || m.Origin["track"] != "flag" || m.StackDepth != 32 {
		t.Fatalf("merge 2: %+v", m)
	}
}

func TestLoadConfigFromEnv(t *testing.T) {
	file := writeFile(t, "min_alloc=1M\n")
	s, err := Load("", []string{"MEMTRACE_CONFIG=" + file, "MEMTRACE_TRACK=malloc,ion"})
	if err != nil {
		t.Fatal(err)
	}
	if s.MinAlloc != 1<<20 || s.Track != TrackMalloc|TrackION {
		t.Fatalf("got %+v", s)
	}
	// --config wins over MEMTRACE_CONFIG.
	other := writeFile(t, "min_alloc=2\n")
	if s, err = Load(other, []string{"MEMTRACE_CONFIG=" + file}); err != nil || s.MinAlloc != 2 {
		t.Fatalf("got %+v, %v", s, err)
	}
	// Neither: nothing set, no error.
	if s, err = Load("", nil); err != nil || len(s.Origin) != 0 {
		t.Fatalf("got %+v, %v", s, err)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		path string
		env  []string
		want string
	}{
		{filepath.Join(dir, "missing.cfg"), nil, "cannot read config file " + filepath.Join(dir, "missing.cfg") + ": no such file or directory; check the path given with --config or MEMTRACE_CONFIG"},
		{"", []string{"MEMTRACE_CONFIG=" + filepath.Join(dir, "gone")}, "gone: no such file or directory"},
		{dir, nil, "is a directory"},
		{writeFile(t, "peak_top_n=x\n"), nil, "memtrace.cfg:1: bad peak_top_n value"},
		{"", []string{"MEMTRACE_STACK_DEPTH=deep"}, `environment variable MEMTRACE_STACK_DEPTH="deep": want a whole number from 0 to 127; fix or unset it`},
		{"", []string{"MEMTRACE_TRACK=malloc,leaks"}, `unknown track word "leaks"`},
	}
	for _, c := range cases {
		_, err := Load(c.path, c.env)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Load(%q, %v) error %v; want one line with %q", c.path, c.env, err, c.want)
		}
	}
	big := writeFile(t, strings.Repeat("# padding\n", maxConfigSize/10+1))
	if _, err := Load(big, nil); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized file: %v", err)
	}
}

// TestLoadNotRegular: a config path that names a FIFO is refused at once
// in one line (it blocked until someone wrote it), a device too, without
// reading it; /dev/null is an empty config.
func TestLoadNotRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo.cfg")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		fifo:        "config file " + fifo + " is a FIFO, not a regular file; give the path of a key=value file",
		"/dev/zero": "config file /dev/zero is a device, not a regular file",
	} {
		done := make(chan error, 1)
		go func() {
			_, err := Load(path, nil)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Load(%s): %v; want one line with %q", path, err, want)
			}
		case <-time.After(5 * time.Second):
			// Let the blocked open end.
			if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
			t.Fatalf("Load(%s) still blocked after 5s", path)
		}
	}
	if s, err := Load("/dev/null", nil); err != nil || len(s.Origin) != 0 {
		t.Errorf("Load(/dev/null) = %+v, %v; want an empty config", s, err)
	}
}

func TestEnvNames(t *testing.T) {
	want := []string{"MEMTRACE_TRACK", "MEMTRACE_STACK_DEPTH", "MEMTRACE_REPORT_DIR",
		"MEMTRACE_SNAPSHOT_INTERVAL_MS", "MEMTRACE_PEAK_TOP_N", "MEMTRACE_MIN_ALLOC"}
	for i, k := range Keys {
		if EnvName(k) != want[i] {
			t.Errorf("EnvName(%s) = %s, want %s", k, EnvName(k), want[i])
		}
	}
}

func TestFormatRoundTrip(t *testing.T) {
	s, err := Parse("a", []byte(memmonExample))
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("b", s.Format(false))
	if err != nil {
		t.Fatal(err)
	}
	s.Origin, back.Origin = nil, nil
	if !reflect.DeepEqual(s, back) {
		t.Fatalf("%+v != %+v", s, back)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(memmonExample))
	f.Add([]byte("track=fd\n#x\n  \nmin_alloc=3G"))
	f.Add([]byte("=\n"))
	f.Add([]byte("report_dir= \x00\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz.cfg", data)
		if err != nil {
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "config file fuzz.cfg:") {
				t.Fatalf("error not one line naming the file: %q", msg)
			}
			return
		}
		back, err := Parse("again", s.Format(true))
		if err != nil {
			t.Fatalf("formatted settings do not parse: %v\n%s", err, s.Format(true))
		}
		if len(back.Origin) != len(s.Origin) {
			t.Fatalf("keys %v became %v", s.Origin, back.Origin)
		}
		s.Origin, back.Origin = nil, nil
		if !reflect.DeepEqual(s, back) {
			t.Fatalf("%+v became %+v", s, back)
		}
	})
}
