package tests

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/report"
)

// hammerC: four threads malloc and free at full speed, and each keeps
// (leaks) five blocks, whose addresses it writes to the file named by argv[1]
// at the end. With a 16 KiB ring buffer the tracer loses records, frees
// among them.
const hammerC = `
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#define THREADS 4
#define ITER 40000
#define KEEP 5
static void *kept[THREADS][KEEP];
static void *volatile sink;

static void *hammer(void *arg) {
	long id = (long)arg;
	for (int i = 0; i < ITER; i++) {
		void *p = malloc(16 + (size_t)(i % 64) * 8);
		sink = p;
		free(p);
		if (i % (ITER / KEEP) == ITER / KEEP / 2)
			kept[id][i / (ITER / KEEP)] = sink = malloc(4000 + (size_t)id);
	}
	return 0;
}

int main(int argc, char **argv) {
	pthread_t t[THREADS];
	for (long i = 0; i < THREADS; i++)
		pthread_create(&t[i], 0, hammer, (void *)i);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], 0);
	static char out[THREADS * KEEP * 24];
	int n = 0;
	for (int i = 0; i < THREADS; i++)
		for (int k = 0; k < KEEP; k++)
			n += snprintf(out + n, sizeof out - n, "%p\n", kept[i][k]);
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	write(fd, out, n);
	close(fd);
	return 0;
}
`

// With lost records, the readers must not call a block a leak that a lost
// free explains: a block whose address was handed out again is unknown.
// The program's own leaks stay leaks; the report says the rest may be
// overstated.
func TestReadersLostRecordsEndToEnd(t *testing.T) {
	requireBPF(t)
	memtrace := need(t, "bin/memtrace")
	dir := t.TempDir()
	src, prog := filepath.Join(dir, "hammer.c"), filepath.Join(dir, "hammer")
	if err := os.WriteFile(src, []byte(hammerC), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := command("gcc", "-O1", "-pthread", "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	var m *analysis.Model
	var logPath, keptPath string
	// Losses depend on scheduling: try a few runs for one that lost records.
	for attempt := 0; attempt < 5; attempt++ {
		logPath, keptPath = filepath.Join(dir, "run.log"), filepath.Join(dir, "kept")
		// Without stacks (the default has them): the case is the lost
		// records, and the leaks the model counts unsuppressed.
		cmd := command(memtrace, "--stack-depth", "0", "--buffer-size", "16K", "-o", logPath, "--", prog, keptPath)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := runCmd(t, cmd, 2*time.Minute); err != nil {
			t.Fatalf("memtrace: %v\n%s", err, stderr.String())
		}
		b := bpfLog(t, logPath)
		m = analysis.New()
		if err := m.ReadAll(bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
		if m.LostEvents > 0 {
			break
		}
	}
	if m.LostEvents == 0 {
		t.Fatal("no record lost with a 16K ring buffer in 5 runs: the test cannot check anything")
	}
	kept := map[uint64]bool{}
	f, err := os.Open(keptPath)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p, err := strconv.ParseUint(strings.TrimPrefix(sc.Text(), "0x"), 16, 64)
		if err != nil {
			t.Fatalf("kept address %q", sc.Text())
		}
		kept[p] = true
	}
	f.Close()
	if len(kept) != 20 {
		t.Fatalf("the program kept %d blocks, want 20", len(kept))
	}
	// The last allocation at each kept address is the kept block: it is a
	// leak, never unknown (its memory was never handed out again). Its
	// record may be among the lost ones.
	last := map[uint64]uint32{}
	for i := range m.TS {
		if kept[m.Ptr[i]] {
			last[m.Ptr[i]] = uint32(i)
		}
	}
	for p, id := range last {
		if st := m.Status(id); st != analysis.StatusLeak {
			t.Errorf("kept block %#x is %s, want leak", p, st)
		}
	}
	unknown, _ := m.Unknown()
	leaks, _ := m.Leaks()
	if unknown == 0 {
		t.Fatalf("%d records lost, %d leaks, none unknown: the lost frees were all counted as leaks", m.LostEvents, leaks)
	}
	if !m.LeaksMayBeOverstated() {
		t.Fatal("leaks not flagged as possibly overstated")
	}
	t.Logf("%d records lost; of %d blocks not freed in the log, %d are unknown (their address came back), %d leaks (%d of the program's 20 kept blocks in the log)",
		m.LostEvents, leaks+unknown, unknown, leaks, len(last))

	// The report says the same, in its words.
	var out, errs bytes.Buffer
	if code := report.Main([]string{"--resolve", "0", logPath}, &out, &errs); code != 0 {
		t.Fatalf("report: %d %s", code, errs.String())
	}
	want := strconv.FormatInt(unknown, 10) + " blocks, "
	for _, w := range []string{want, ": unknown (records lost)", "(" + strconv.FormatInt(leaks, 10) + " leaks)", "leaks may be overstated"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("report lacks %q:\n%s", w, out.String())
		}
	}
}
