package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const churnLibSrc = `#include <stdlib.h>
__attribute__((noinline)) void *lib_alloc(size_t n) { void *p = malloc(n); __asm__ volatile(""); return p; }
`

// churnMainSrc: argv[1..3] are three copies of one library (three files);
// four threads each dlopen one, allocate through it (size 1000 + its
// index), free, allocate in the program, and dlclose it, 200 times. It
// prints how often a library's function came at an address where another
// of the three had had its own: the case where a stale module table would
// name the wrong file.
const churnMainSrc = `#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#define T 4
#define ITERS 200
#define K 3
#define SEEN 256
static const char *libs[K];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t seen_at[SEEN];
static int seen_lib[SEEN], nseen, reused;
static void note(void *f, int k)
{
	pthread_mutex_lock(&mu);
	int i = 0;
	while (i < nseen && seen_at[i] != (uintptr_t)f)
		i++;
	if (i < nseen) {
		if (seen_lib[i] != k)
			reused++;
		seen_lib[i] = k;
	} else if (nseen < SEEN) {
		seen_at[nseen] = (uintptr_t)f;
		seen_lib[nseen++] = k;
	}
	pthread_mutex_unlock(&mu);
}
__attribute__((noinline)) void *work(void *(*f)(size_t), size_t n) { void *p = f(n); __asm__ volatile(""); return p; }
static void *thread(void *arg)
{
	long id = (long)arg;
	for (int i = 0; i < ITERS; i++) {
		int k = (int)((i * 7 + id * 5) % K);
		void *h = dlopen(libs[k], RTLD_NOW | RTLD_LOCAL);
		if (!h) { fprintf(stderr, "%s\n", dlerror()); exit(1); }
		void *(*f)(size_t) = (void *(*)(size_t))dlsym(h, "lib_alloc");
		if (!f) exit(1);
		note((void *)f, k);
		void *volatile p = work(f, 1000 + k);
		free(p);
		void *volatile q = malloc(64 + id);
		free(q);
		if (dlclose(h)) exit(1);
	}
	return 0;
}
int main(int argc, char **argv)
{
	if (argc != K + 1) return 2;
	for (int k = 0; k < K; k++) libs[k] = argv[k + 1];
	pthread_t th[T];
	for (long i = 0; i < T; i++)
		if (pthread_create(&th[i], 0, thread, (void *)i)) return 1;
	for (int i = 0; i < T; i++) pthread_join(th[i], 0);
	printf("reused %d\n", reused);
	return 0;
}
`

// TestPreloadDlcloseChurn: threads that dlopen, allocate through and
// dlclose libraries in a loop, where one library often comes at the
// addresses another had, get every frame in its own file: the module
// table the walks take without asking the loader is asked again after
// each dlclose (fallback-preload/c/modules.h). The program's count of
// such reuses must be above zero, or the run proved nothing.
func TestPreloadDlcloseChurn(t *testing.T) {
	need(t, "bin/memtrace")
	dir := t.TempDir()
	src := filepath.Join(dir, "lib.c")
	if err := os.WriteFile(src, []byte(churnLibSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	built := filepath.Join(dir, "lib.so")
	if out, err := command("gcc", "-shared", "-fPIC", "-O1", "-fno-omit-frame-pointer", "-o", built, src).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	data, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	var libs []string
	for k := 0; k < 3; k++ {
		p := filepath.Join(dir, fmt.Sprintf("libchurn%d.so", k))
		if err := os.WriteFile(p, data, 0o755); err != nil {
			t.Fatal(err)
		}
		libs = append(libs, p)
	}
	bin := buildWith(t, "gcc", "dlchurn", churnMainSrc, "-O1", "-fno-omit-frame-pointer", "-pthread", "-ldl")
	reusedAll := 0
	for round := range rounds(3, 1) {
		log := filepath.Join(t.TempDir(), "log")
		code, so, se := memtraceRun(t, nil, append([]string{"--preload", "--stack-depth", "8", "-o", log, "--", bin}, libs...)...)
		if code != 0 {
			t.Fatalf("round %d: memtrace exit %d: %s", round, code, se)
		}
		var reused int
		if _, err := fmt.Sscanf(strings.TrimSpace(so), "reused %d", &reused); err != nil {
			t.Fatalf("round %d: the program printed %q", round, so)
		}
		reusedAll += reused
		if m := logMode(t, log); m != "preload" {
			t.Fatalf("the log says mode=%s, want preload", m)
		}
		evs := readStacks(t, log)
		for k, lib := range libs {
			want := 0
			for id := 0; id < 4; id++ {
				for i := 0; i < 200; i++ {
					if (i*7+id*5)%3 == k {
						want++
					}
				}
			}
			got := find(evs, "malloc", uint64(1000+k))
			if len(got) != want {
				t.Errorf("round %d: %d mallocs of %d bytes, want %d", round, len(got), 1000+k, want)
			}
			bad := 0
			for _, e := range got {
				if len(e.frames) < 2 || e.frames[0].module != lib || e.frames[0].symbol != "lib_alloc" ||
					e.frames[1].module != bin || e.frames[1].symbol != "work" {
					if bad++; bad <= 3 {
						t.Errorf("round %d: malloc(%d): frames %+v, want lib_alloc in %s, then work in %s",
							round, 1000+k, e.frames, lib, bin)
					}
				}
			}
			if bad > 3 {
				t.Errorf("round %d: malloc(%d): %d stacks wrong in all", round, 1000+k, bad)
			}
		}
	}
	if reusedAll == 0 {
		t.Errorf("no library came where another had been: the run proves nothing of a stale table")
	}
	t.Logf("a library at another's addresses %d times", reusedAll)
}
