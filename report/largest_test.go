package report

import (
	"encoding/json"
	"strings"
	"testing"
)

// largestLog's largest single allocation per call stack is known:
//
//	many_small ← main: five blocks of 100 (the most calls and bytes, the smallest largest)
//	one_big ← main: one block of 600
//	pair ← caller_a: 300; pair ← caller_b: 50 and 250 (one entry, pair, whose largest is 300)
func largestLog() []byte {
	l := &lb{}
	l.meta("header", "version", "test", "pid", "100", "comm", "app")
	ts := uint64(10)
	for range 5 {
		l.alloc(1, "app", "malloc", ts, 100, 0x100, fr{"many_small", 0x10}, fr{"main", 0x20}).free(1, "app", ts+1, 100, 0x100)
		ts += 2
	}
	l.alloc(1, "app", "malloc", ts, 600, 0x200, fr{"one_big", 0x30}, fr{"main", 0x40})
	l.alloc(1, "app", "malloc", ts+1, 300, 0x300, fr{"pair", 0x50}, fr{"caller_a", 0x60})
	l.alloc(1, "app", "malloc", ts+2, 50, 0x400, fr{"pair", 0x50}, fr{"caller_b", 0x70})
	l.alloc(1, "app", "malloc", ts+3, 250, 0x500, fr{"pair", 0x50}, fr{"caller_b", 0x70})
	l.ended(ts+4, 100)
	return l.b
}

func TestLargestRanking(t *testing.T) {
	log := writeFile(t, "largest.log", largestLog())
	// Off by default: the report reads as it did before the ranking.
	text, _, code := runMain(t, "--resolve", "0", log)
	if code != 0 || strings.Contains(text, "LARGEST") {
		t.Fatalf("exit %d, largest shown by default:\n%s", code, text)
	}
	text, errs, code := runMain(t, "--resolve", "0", "--print-largest", "-a", "0", "-p", "0", "-l", "0", "-T", "0", log)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := `LARGEST SINGLE ALLOCATIONS
600B largest single allocation over 1 calls from
one_big
  in /nonexistent/app
600B largest over 1 calls from:
    main
      in /nonexistent/app

300B largest single allocation over 3 calls from
pair
  in /nonexistent/app
300B largest over 1 calls from:
    caller_a
      in /nonexistent/app
250B largest over 2 calls from:
    caller_b
      in /nonexistent/app

100B largest single allocation over 5 calls from
many_small
  in /nonexistent/app
100B largest over 5 calls from:
    main
      in /nonexistent/app

`
	if !strings.HasPrefix(text, "memtrace report of ") || !strings.Contains(text, "\n"+want) {
		t.Errorf("text:\n%s\nwant the ranking:\n%s", text, want)
	}

	out, errs, code := runMain(t, "--resolve", "0", "--print-largest", "--json", "-", log)
	if code != 0 {
		t.Fatalf("json: exit %d: %s", code, errs)
	}
	var j struct {
		Rankings map[string][]struct {
			Calls   int64  `json:"calls"`
			Largest *int64 `json:"largest_bytes"`
			Stack   []struct {
				Function string `json:"function"`
			} `json:"stack"`
		} `json:"rankings"`
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	type got struct {
		fn, caller string
		largest    int64
		calls      int64
	}
	var list []got
	for _, e := range j.Rankings["largest"] {
		if e.Largest == nil || len(e.Stack) != 2 {
			t.Fatalf("entry without largest_bytes or its stack: %s", out)
		}
		list = append(list, got{e.Stack[0].Function, e.Stack[1].Function, *e.Largest, e.Calls})
	}
	wantJSON := []got{{"one_big", "main", 600, 1}, {"pair", "caller_a", 300, 1}, {"pair", "caller_b", 250, 2}, {"many_small", "main", 100, 5}}
	if len(list) != len(wantJSON) {
		t.Fatalf("largest ranking %+v, want %+v", list, wantJSON)
	}
	for i := range list {
		if list[i] != wantJSON[i] {
			t.Errorf("entry %d: %+v, want %+v", i, list[i], wantJSON[i])
		}
	}
	// The other rankings' entries do not carry it.
	if c := j.Rankings["calls"]; len(c) == 0 || c[0].Largest != nil {
		t.Errorf("calls ranking: %+v", c)
	}
}
