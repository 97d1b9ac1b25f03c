package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/internal/heapprof/heapproftest"
	"github.com/memtrace/memtrace/internal/units"
)

// figures is what one reader says of a log: its leaks (the suppressed
// ones left out), the suppressed ones, the peak and the runtime. A reader
// that does not give one leaves it at -1 (a text figure at "").
type figures struct {
	reader                string
	leaks, leaked         int64
	suppressed, suppBytes int64
	peak                  int64
	runtimeUS             int64
	suppText              string // the suppressed leaks as the reader words them
	leakedUnit            string // units.Bytes of the leaked bytes, for a reader that prints no more
}

func unknownFigures(reader string) figures {
	return figures{reader: reader, leaks: -1, leaked: -1, suppressed: -1, suppBytes: -1, peak: -1, runtimeUS: -1}
}

var (
	agreeRuntime    = regexp.MustCompile(`(?m)^total runtime: (\d+\.\d+)s\.$`)
	agreePeak       = regexp.MustCompile(`(?m)^peak heap memory consumption: (\S+) after`)
	agreeLeaked     = regexp.MustCompile(`(?m)^total memory leaked: (\S+) \((\d+) leaks\)$`)
	agreeSuppressed = regexp.MustCompile(`(?m)^(suppressed leaks: (\S+) \((\d+) leaks\))`)
	agreeHTMLRow    = regexp.MustCompile(`<tr><th>([^<]+)</th><td>([^<]*)</td></tr>`)
	agreeDumpTotal  = regexp.MustCompile(`(?m)^TOTAL\s+\d+\s+\d+\s+\d+\s+\d+\s+\d+\s+(\d+)\s+(\d+)\s*$`)
)

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// secondsUS reads "0.051433" as microseconds, exactly.
func secondsUS(t *testing.T, s string) int64 {
	t.Helper()
	whole, frac, _ := strings.Cut(s, ".")
	frac = (frac + "000000")[:6]
	return atoi(t, whole)*1e6 + atoi(t, frac)
}

// readAll reads the log at path with every reader: the text report, its
// JSON, its HTML summary, its pprof export, memview --dump-threads and
// memview's header (the viewer package on a simulated screen).
func readAll(t *testing.T, path string) []figures {
	t.Helper()
	dir := t.TempDir()
	jsonPath, htmlPath, pprofPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html"), filepath.Join(dir, "r.pb.gz")
	code, text, se := memtraceRun(t, nil, "report", "--json", jsonPath, "--html", htmlPath, "--pprof", pprofPath, path)
	if code != 0 {
		t.Fatalf("memtrace report: exit %d: %s", code, se)
	}
	var out []figures

	f := unknownFigures("report text")
	if m := agreeLeaked.FindStringSubmatch(text); m != nil {
		f.leakedUnit, f.leaks = m[1], atoi(t, m[2])
	}
	if m := agreeSuppressed.FindStringSubmatch(text); m != nil {
		f.suppText, f.suppressed = m[1], atoi(t, m[3])
	}
	if m := agreeRuntime.FindStringSubmatch(text); m != nil {
		f.runtimeUS = secondsUS(t, m[1])
	}
	if m := agreePeak.FindStringSubmatch(text); m == nil || f.leaks < 0 || f.suppText == "" || f.runtimeUS < 0 {
		t.Fatalf("the report lacks a figure:\n%s", text)
	}
	out = append(out, f)

	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Summary struct {
			RuntimeS        float64 `json:"runtime_s"`
			PeakBytes       int64   `json:"peak_bytes"`
			Leaks           int64   `json:"leaks"`
			LeakedBytes     int64   `json:"leaked_bytes"`
			SuppressedLeaks int64   `json:"suppressed_leaks"`
			SuppressedBytes int64   `json:"suppressed_bytes"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatalf("the report's JSON: %v", err)
	}
	s := j.Summary
	out = append(out, figures{reader: "report --json", leaks: s.Leaks, leaked: s.LeakedBytes, suppressed: s.SuppressedLeaks,
		suppBytes: s.SuppressedBytes, peak: s.PeakBytes, runtimeUS: int64(s.RuntimeS*1e6 + 0.5)})

	page, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, m := range agreeHTMLRow.FindAllStringSubmatch(string(page), -1) {
		if _, ok := rows[m[1]]; !ok { // the first table is the summary
			rows[m[1]] = html.UnescapeString(m[2])
		}
	}
	f = unknownFigures("report --html")
	if m := regexp.MustCompile(`^(\S+) \((\d+) leaks\)$`).FindStringSubmatch(rows["total memory leaked"]); m != nil {
		f.leakedUnit, f.leaks = m[1], atoi(t, m[2])
	}
	if sup, _, ok := strings.Cut(rows["suppressed leaks"], ";"); ok {
		f.suppText = "suppressed leaks: " + sup
		if m := regexp.MustCompile(`\((\d+) leaks\)$`).FindStringSubmatch(sup); m != nil {
			f.suppressed = atoi(t, m[1])
		}
	}
	if r, ok := strings.CutSuffix(rows["total runtime"], "s"); ok {
		f.runtimeUS = secondsUS(t, r)
	}
	out = append(out, f)

	pf, err := os.Open(pprofPath)
	if err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(pf)
	pf.Close()
	if err != nil {
		t.Fatalf("the pprof export: %v", err)
	}
	idx := map[string]int{}
	for k, st := range p.SampleType {
		idx[st.Type] = k
	}
	// pprof has no suppressed figure: a suppressed sample is labelled,
	// its leaks out of inuse.
	// No duration (a snapshot, heapproftest): the runtime is a comment.
	if bad := heapproftest.Check(p, heapproftest.Want{Peak: true}); len(bad) > 0 {
		t.Errorf("the pprof export:\n%s", strings.Join(bad, "\n"))
	}
	f = figures{reader: "report --pprof", suppressed: -1, suppBytes: -1, runtimeUS: -1}
	for _, c := range p.Comments {
		if d, ok := strings.CutPrefix(c, "runtime "); ok {
			rt, err := time.ParseDuration(d)
			if err != nil {
				t.Fatalf("the pprof export's comment %q: %v", c, err)
			}
			f.runtimeUS = rt.Microseconds()
		}
	}
	if f.runtimeUS < 0 {
		t.Errorf("the pprof export has no runtime comment: %q", p.Comments)
	}
	labelled := 0
	for _, smp := range p.Sample {
		f.leaks += smp.Value[idx["inuse_objects"]]
		f.leaked += smp.Value[idx["inuse_space"]]
		f.peak += smp.Value[idx["peak_space"]]
		if len(smp.Label["suppressed"]) > 0 {
			labelled++
		}
	}
	if labelled == 0 {
		t.Errorf("no pprof sample is labelled suppressed")
	}
	out = append(out, f)

	dump, err := command(need(t, "bin/memview"), "--dump-threads", path).Output()
	if err != nil {
		t.Fatalf("memview --dump-threads: %v", err)
	}
	f = unknownFigures("memview --dump-threads")
	if m := agreeDumpTotal.FindStringSubmatch(string(dump)); m != nil {
		f.leaks, f.leaked = atoi(t, m[1]), atoi(t, m[2])
	}
	if m := agreeSuppressed.FindStringSubmatch(string(dump)); m != nil {
		f.suppText, f.suppressed = m[1], atoi(t, m[3])
	}
	out = append(out, f)

	h := memviewHeader(t, path)
	out = append(out, figures{reader: "memview header", leaks: h.Leaks, leaked: int64(h.LeakBytes), suppressed: h.Suppressed,
		suppBytes: int64(h.SuppressedBytes), peak: -1, runtimeUS: -1})
	if want := "+" + strconv.FormatInt(h.Suppressed, 10) + " suppressed (" + units.Bytes(h.SuppressedBytes) + ")"; !strings.Contains(h.LeaksText(), want) {
		t.Errorf("memview's header %q lacks %q", h.LeaksText(), want)
	}

	// The JSON's exact figures stand for the readers that print units.
	for k := range out {
		if out[k].leaked < 0 && out[k].leakedUnit == units.Bytes(uint64(s.LeakedBytes)) {
			out[k].leaked = s.LeakedBytes
		}
		if out[k].peak < 0 && k < 3 {
			out[k].peak = s.PeakBytes // the text and HTML print the JSON's peak in units: checked below
		}
	}
	if m := agreePeak.FindStringSubmatch(text); m[1] != units.Bytes(uint64(s.PeakBytes)) {
		t.Errorf("the text report's peak %s, its JSON's %d", m[1], s.PeakBytes)
	}
	if rows["peak heap memory consumption"] == "" || !strings.HasPrefix(rows["peak heap memory consumption"], units.Bytes(uint64(s.PeakBytes))) {
		t.Errorf("the HTML's peak %q, the JSON's %d", rows["peak heap memory consumption"], s.PeakBytes)
	}
	return out
}

// compareFigures fails unless every reader that gives a figure gives the
// JSON's (runtime to the log's µs), and the readers that write the
// suppressed leaks out word them as the text report does.
func compareFigures(t *testing.T, says []figures) {
	t.Helper()
	ref := says[1] // the JSON: every figure, exactly
	if w := analysis.SuppressedLine(ref.suppressed, uint64(ref.suppBytes)); w != says[0].suppText {
		t.Errorf("the text report words the suppressed leaks %q, its JSON's figures read %q", says[0].suppText, w)
	}
	for _, s := range says {
		for _, c := range []struct {
			name      string
			got, want int64
		}{
			{"leaks", s.leaks, ref.leaks},
			{"leaked bytes", s.leaked, ref.leaked},
			{"suppressed leaks", s.suppressed, ref.suppressed},
			{"suppressed bytes", s.suppBytes, ref.suppBytes},
			{"peak bytes", s.peak, ref.peak},
			{"runtime µs", s.runtimeUS, ref.runtimeUS},
		} {
			if c.got >= 0 && c.got != c.want {
				t.Errorf("%s: %s %d, report --json %d", s.reader, c.name, c.got, c.want)
			}
		}
		if s.suppText != "" && s.suppText != says[0].suppText {
			t.Errorf("%s words the suppressed leaks %q, the text report %q", s.reader, s.suppText, says[0].suppText)
		}
	}
}

// agreeRun traces tests/progs/agree (one leak of 1000 × 264 B from
// leak_nodes, temporaries in a loop, libstdc++'s emergency pool) with a
// --report-dir, and returns the log and the report-dir's head.
func agreeRun(t *testing.T, preload bool) (string, map[string]string) {
	t.Helper()
	prog := need(t, "tests/progs/build/agree")
	dir := t.TempDir()
	log, reports := filepath.Join(dir, "agree.log"), filepath.Join(dir, "reports")
	args := []string{"--stack-depth", "16", "--report-dir", reports, "-o", log, "--", prog}
	if preload {
		args = append([]string{"--preload"}, args...)
	}
	if code, _, se := memtraceRun(t, nil, args...); code != 0 {
		t.Fatalf("memtrace: exit %d: %s", code, se)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if !preload {
		bpftest.RequireModeBPF(t, b)
	} else if !bytes.Contains(b, []byte(" mode=preload")) {
		t.Fatalf("the --preload log's header is not mode=preload:\n%s", grepLines(b, "[memtrace] header"))
	}
	txts, _ := filepath.Glob(filepath.Join(reports, "agree-*_*.txt"))
	if len(txts) != 1 {
		t.Fatalf("the report dir holds %v", txts)
	}
	rep, err := os.ReadFile(txts[0])
	if err != nil {
		t.Fatal(err)
	}
	head := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(rep))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if !ok {
			break
		}
		head[k] = v
	}
	return log, head
}

// TestEveryReaderAgrees: one real C++ run, on eBPF and under --preload,
// read by every reader: the same leaks (the program's 1000 × 264 B, the
// suppressed libstdc++ pool left out everywhere, pprof's inuse too), the
// same suppressed leaks in one wording, the same peak and runtime; the
// --report-dir file, written by the agent itself, has the same peak,
// leaks and suppressed leaks.
func TestEveryReaderAgrees(t *testing.T) {
	if testing.Short() {
		t.Skip("traces a program twice and reads each log six times")
	}
	for _, preload := range []bool{false, true} {
		name := "bpf"
		if preload {
			name = "preload"
		}
		t.Run(name, func(t *testing.T) {
			if !preload {
				requireBPF(t)
			}
			log, head := agreeRun(t, preload)
			says := readAll(t, log)
			compareFigures(t, says)
			ref := says[1]
			if ref.leaks != 1000 || ref.leaked != 1000*264 {
				t.Errorf("the readers agree on %d leaks of %d bytes, want the program's 1000 of 264000", ref.leaks, ref.leaked)
			}
			if ref.suppressed < 1 || ref.suppBytes < 1 {
				t.Errorf("no suppressed leak: the libstdc++ pool is missing (%+v)", ref)
			}
			if got := head["peak_bytes"]; got != strconv.FormatInt(ref.peak, 10) {
				t.Errorf("--report-dir peak_bytes %s, the report %d", got, ref.peak)
			}
			for k, want := range map[string]int64{"current_bytes": int64(ref.leaked), "leak_blocks": ref.leaks,
				"suppressed_bytes": int64(ref.suppBytes), "suppressed_blocks": ref.suppressed} {
				if got := head[k]; got != strconv.FormatInt(want, 10) {
					t.Errorf("--report-dir %s %s, the report %d", k, got, want)
				}
			}
			if t.Failed() {
				for _, s := range says {
					t.Logf("%+v", s)
				}
			}
		})
	}
}

// TestRuntimeFromRelease: with --port, the program is released once a
// viewer connects; the log, and so the report's runtime and peak time,
// count from the release, not from memtrace's start: a viewer that
// connects a second and a half late adds nothing to them.
func TestRuntimeFromRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a late viewer")
	}
	requireBPF(t)
	prog := need(t, "tests/progs/build/agree")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	const late = 1500 * time.Millisecond
	got := make(chan []byte, 1)
	go func() {
		time.Sleep(late)
		var c net.Conn
		var err error
		for k := 0; k < 100; k++ {
			if c, err = net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		var b bytes.Buffer
		b.ReadFrom(c)
		got <- b.Bytes()
	}()
	start := time.Now()
	if code, _, se := memtraceRun(t, nil, "--stack-depth", "16", "--port", strconv.Itoa(port), "--", prog); code != 0 {
		t.Fatalf("memtrace: exit %d: %s", code, se)
	}
	took := time.Since(start)
	b := <-got
	if b == nil {
		t.Fatal("the viewer could not connect")
	}
	bpftest.RequireModeBPF(t, b)
	log := filepath.Join(t.TempDir(), "port.log")
	if err := os.WriteFile(log, b, 0o644); err != nil {
		t.Fatal(err)
	}
	says := readAll(t, log)
	compareFigures(t, says)
	rt := time.Duration(says[1].runtimeUS) * time.Microsecond
	if took < late || rt <= 0 || rt > took-late {
		t.Errorf("runtime %v for a run of %v whose viewer connected after %v: the wait is in it", rt, took, late)
	}
}
