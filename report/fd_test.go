package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fdReportLog: process 100 allocates, opens /etc/hosts and closes it,
// reuses fd 3 for a file it keeps, makes a pipe (closes one end), a
// socket, a dup of it closed by close_range; it exits and the tracer lists
// 3, 4 and 5 as open. Process 200 was forked before the socket, closes
// the copy of 3 and is killed with the copy of 4: one leak, no allocation.
const fdReportLog = `[memtrace] header version=test pid=100 comm=app cmd=./app start=0 mode=launch
[memtrack] tid=100 (app            ) malloc ts=1 size=16 total=16 ptr=0x10
[memtrace] fd event=open tid=100 pid=100 ts=10 name=app fd=3 call=openat kind=file path=/etc/hosts
[memtrace] fd event=close tid=100 pid=100 ts=11 name=app fd=3 call=close kind=file path=/etc/hosts
[memtrace] fd event=open tid=100 pid=100 ts=12 name=app fd=3 call=openat kind=file path=/tmp/kept.txt
[memtrace] fd event=open tid=100 pid=100 ts=13 name=app fd=4 call=pipe2 kind=pipe peer=9
[memtrace] fd event=open tid=100 pid=100 ts=13 name=app fd=9 call=pipe2 kind=pipe peer=4
[memtrace] fd event=close tid=100 pid=100 ts=14 name=app fd=9 call=close kind=pipe
[memtrace] proc event=fork pid=200 ppid=100 ts=15
[memtrace] fd event=close tid=200 pid=200 ts=16 name=kid fd=3 call=close kind=file
[memtrace] fd event=open tid=100 pid=100 ts=20 name=app fd=5 call=socket kind=socket domain=inet
[memtrace] fd event=open tid=100 pid=100 ts=21 name=app fd=6 call=dup kind=socket old=5
[memtrace] fd event=close tid=100 pid=100 ts=22 name=app fd=6 call=close_range kind=socket
[memtrace] proc event=exit pid=100 ts=30
[memtrace] fd event=leak tid=100 pid=100 ts=12 fd=3 call=openat kind=file path=/tmp/kept.txt
[memtrace] fd event=leak tid=100 pid=100 ts=13 fd=4 call=pipe2 kind=pipe
[memtrace] fd event=leak tid=100 pid=100 ts=20 fd=5 call=socket kind=socket
`

func TestFDLeaksText(t *testing.T) {
	log := writeFile(t, "fd.log", []byte(fdReportLog))
	out, errs, code := runMain(t, log)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	mustContain(t, out,
		"========== PID 100 APP (FD.LOG) ==========",
		"LEAKED FILE DESCRIPTORS\nfd 3 file (openat) /tmp/kept.txt opened at 0.000012s by thread 100 (app)\nfd 4 pipe (pipe2) opened at 0.000013s by thread 100 (app)\nfd 5 socket (socket) opened at 0.000020s by thread 100 (app)\n\n",
		"========== PID 200 (FD.LOG) ==========",
		"LEAKED FILE DESCRIPTORS\nfd 4 pipe (pipe2) opened at 0.000013s by thread 100, inherited at fork\n\n",
		"========== ALL 2 PROCESSES ==========",
		"LEAKED FILE DESCRIPTORS\npid 100 fd 3 file",
		"pid 200 fd 4 pipe (pipe2)",
		"file descriptors leaked: 3\n",
		"file descriptors leaked: 1\n",
		"file descriptors leaked: 4\n",
	)
	for _, closed := range []string{"/etc/hosts", "fd 6", "fd 9"} {
		if strings.Contains(out, closed) {
			t.Errorf("closed descriptor %q reported:\n%s", closed, out)
		}
	}
	// The fd-only child is not "empty".
	if strings.Contains(out, "is empty") {
		t.Errorf("fd-only process reported as an empty log:\n%s", out)
	}
	// -n 1 limits the list; -l 0 turns it off, but not the summary line.
	out, _, _ = runMain(t, log, "-n", "1", "--pid", "100")
	mustContain(t, out, "LEAKED FILE DESCRIPTORS\nfd 3 file (openat) /tmp/kept.txt", "and 2 more\n", "file descriptors leaked: 3\n")
	out, _, _ = runMain(t, log, "-l", "0")
	if strings.Contains(out, "LEAKED FILE DESCRIPTORS") || !strings.Contains(out, "file descriptors leaked: 4") {
		t.Fatalf("-l 0:\n%s", out)
	}
	// A log without descriptor lines has no descriptor line at all.
	out, _, _ = runMain(t, writeFile(t, "known.log", knownLog()))
	if strings.Contains(out, "file descriptors") {
		t.Fatalf("descriptors reported for a log without fd lines:\n%s", out)
	}
}

func TestFDLeaksJSONAndHTML(t *testing.T) {
	log := writeFile(t, "fd.log", []byte(fdReportLog))
	html := filepath.Join(t.TempDir(), "r.html")
	out, _, code := runMain(t, "--json", "-", "--html", html, log)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var j jsonReport
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if j.FDLeaks == nil || j.FDLeaks.Count != 4 || len(j.FDLeaks.Descriptors) != 4 || j.Summary.FDLeaks != 4 {
		t.Fatalf("fd_leaks %+v", j.FDLeaks)
	}
	var got []string
	for _, d := range j.FDLeaks.Descriptors {
		got = append(got, strings.Join([]string{d.Kind, d.Call, d.Path}, ":"))
	}
	if want := "file:openat:/tmp/kept.txt pipe:pipe2: socket:socket: pipe:pipe2:"; strings.Join(got, " ") != want {
		t.Fatalf("descriptors %q, want %q", got, want)
	}
	if d := j.FDLeaks.Descriptors[0]; d.PID != 100 || d.FD != 3 || d.OpenedS != 0.000012 || d.TID != 100 || d.Thread != "app" || !d.AtExit {
		t.Fatalf("first %+v", d)
	}
	if d := j.FDLeaks.Descriptors[3]; d.PID != 200 || !d.Inherited || d.AtExit {
		t.Fatalf("child's %+v", d)
	}
	if len(j.Processes) != 2 || j.Processes[0].FDLeaks.Count != 3 || j.Processes[1].FDLeaks.Count != 1 || j.Processes[1].PID != 200 {
		t.Fatalf("processes %+v", j.Processes)
	}
	// The raw JSON spells the key fd_leaks.
	if !strings.Contains(out, `"fd_leaks": {`) {
		t.Fatalf("no fd_leaks object:\n%s", out)
	}
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, string(page), `<section id="fd-leaks"><h2>Leaked file descriptors (4)</h2>`,
		"<td>100</td><td>3</td><td>file</td><td>openat</td><td>/tmp/kept.txt</td>",
		"<tr><th>file descriptors leaked</th><td>4</td></tr>")
}
