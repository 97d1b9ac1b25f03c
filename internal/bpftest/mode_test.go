package bpftest

import (
	"fmt"
	"strings"
	"testing"
)

// fakeTB records a Fatalf and stops the helper the way testing does.
type fakeTB struct {
	testing.TB
	msg string
}

type stopped struct{}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, a ...any) {
	f.msg = fmt.Sprintf(format, a...)
	panic(stopped{})
}

func runHelper(log string) (msg string) {
	f := &fakeTB{}
	defer func() {
		if r := recover(); r != nil && r != (stopped{}) {
			panic(r)
		}
		msg = f.msg
	}()
	RequireModeBPF(f, []byte(log))
	return ""
}

func TestRequireModeBPF(t *testing.T) {
	const bpf = "[memtrace] header version=0.1.0 pid=1 pids=1 comm=a cmd=a start=x mode=bpf probes=uprobe_session\n"
	const preload = "[memtrace] header version=0.1.0 pid=1 start=x mode=preload comm=a cmd=a\n"
	const alloc = "[memtrack] tid=1      (a              ) malloc     ts=1            size=10            total=10            ptr=0x10\n"
	for _, c := range []struct {
		name, log, want string // want: "" passes, else part of the failure
	}{
		{"bpf", bpf + alloc, ""},
		{"bpf after noise", "garbage line\n" + bpf + alloc, ""},
		{"preload", preload + alloc, `mode="preload"`},
		{"no header", alloc, "no [memtrace] header"},
		{"empty", "", "no [memtrace] header"},
		{"header without mode", "[memtrace] header version=0.1.0 pid=1\n", `mode=""`},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := runHelper(c.log)
			switch {
			case c.want == "" && msg != "":
				t.Errorf("failed a good log: %s", msg)
			case c.want != "" && msg == "":
				t.Errorf("passed a log it must fail")
			case c.want != "" && !strings.Contains(msg, c.want):
				t.Errorf("message %q lacks %q", msg, c.want)
			}
		})
	}
}
