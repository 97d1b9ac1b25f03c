package runner

import "testing"

// TestParseOutput: each -o spelling is read once into one kind, and a
// file that only looks like a magic name stays a file.
func TestParseOutput(t *testing.T) {
	for arg, want := range map[string]Output{
		"":                {Kind: OutStderr},
		"/dev/stderr":     {Kind: OutStderr},
		"/dev//stderr":    {Kind: OutStderr},
		"-":               {Kind: OutStdout},
		"/dev/stdout":     {Kind: OutStdout},
		"none":            {Kind: OutNone},
		"./none":          {Kind: OutFile, Path: "./none"},
		"./-":             {Kind: OutFile, Path: "./-"},
		"run.log.zst":     {Kind: OutFile, Path: "run.log.zst"},
		"/dev/fd/3":       {Kind: OutFile, Path: "/dev/fd/3"},
		"heap.pb.gz":      {Kind: OutFile, Path: "heap.pb.gz"},
		"/tmp/x/none.log": {Kind: OutFile, Path: "/tmp/x/none.log"},
	} {
		got := ParseOutput(arg)
		if got != want {
			t.Errorf("ParseOutput(%q) = %+v, want %+v", arg, got, want)
		}
		if want.Kind == OutFile && got.File() != arg {
			t.Errorf("ParseOutput(%q).File() = %q", arg, got.File())
		}
		if want.Kind != OutFile && got.File() != "" {
			t.Errorf("ParseOutput(%q).File() = %q, want none", arg, got.File())
		}
		if back := ParseOutput(got.String()); back != got {
			t.Errorf("ParseOutput(%q).String() = %q reads back as %+v", arg, got.String(), back)
		}
	}
}
