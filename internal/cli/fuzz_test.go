package cli

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzParse: any command line parses or fails with ErrHelp, ErrVersion or
// one UsageError line, for each command's table, without a panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"--stack-dept 4 -- true", "-o", "-f - x", "--=x", "-- -x", "-l 0 a.log", "---x", "-=", "--interval=1s prog"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, " ")
		for _, c := range Commands {
			p := NewParser(c)
			var d time.Duration
			if c == Memtrace {
				p.Duration(&d, "interval")
			}
			p.BindRest()
			_, err := p.Parse(args)
			var ue UsageError
			switch {
			case err == nil, errors.Is(err, ErrHelp), errors.Is(err, ErrVersion):
			case errors.As(err, &ue):
				if strings.Contains(ue.Msg, "\n") && !strings.Contains(line, "\n") {
					t.Errorf("%s %q: two lines: %q", c.Name, args, ue.Msg)
				}
			default:
				t.Errorf("%s %q: %v", c.Name, args, err)
			}
		}
	})
}
