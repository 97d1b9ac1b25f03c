package analysis

import (
	"slices"
	"testing"
)

func TestShortenTemplates(t *testing.T) {
	for in, want := range map[string]string{
		"std::vector<int, std::allocator<int> >::push_back(int const&)":            "std::vector<>::push_back(int const&)",
		"std::_Hashtable<std::string, std::pair<std::string const, int> >::find()": "std::_Hashtable<>::find()",
		"plain_c_function": "plain_c_function",
		"std::ostream& std::operator<< <std::char_traits<char> >(std::ostream&)": "std::ostream& std::operator<< <>(std::ostream&)",
		"bool operator<(Key const&, Key const&)":                                 "bool operator<(Key const&, Key const&)",
		"Foo::operator>>(int)":                                                   "Foo::operator>>(int)",
		"Foo::operator->()":                                                      "Foo::operator->()",
		"unbalanced>name<still":                                                  "unbalanced>name<",
		"f<g<h<i> > >::k<l>":                                                     "f<>::k<>",
	} {
		if got := ShortenTemplates(in); got != want {
			t.Errorf("ShortenTemplates(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStackEnd(t *testing.T) {
	for _, c := range []struct {
		names []string
		n     int
		cut   bool
	}{
		{[]string{"leaf", "main", "__libc_start_call_main", "__libc_start_main", "_start"}, 2, true},
		{[]string{"leaf", "main"}, 2, false},
		{[]string{"leaf", "worker", "start_thread", "clone3"}, 2, true},
		{[]string{"leaf", "worker", "start_thread", "__clone3"}, 2, true},
		// A stripped program: its main is unnamed, what called it is not.
		{[]string{"leaf", "prog+0x9a1a", "__libc_start_call_main", "__libc_start_main", "prog+0xa7a1"}, 2, true},
		// main, not the start-up code under it, ends it even when the
		// latter comes first in the list of names.
		{[]string{"a", "main", "x", "main"}, 2, true},
		{[]string{"_start"}, 1, false},
		{[]string{"leaf", "caller"}, 2, false},
		{nil, 0, false},
	} {
		n, cut := StackEnd(c.names)
		if n != c.n || cut != c.cut {
			t.Errorf("StackEnd(%q) = %d, %v; want %d, %v", c.names, n, cut, c.n, c.cut)
		}
	}
}

func TestDistinctLabels(t *testing.T) {
	got := DistinctLabels([][]string{
		{"xmalloc", "parse", "main"},
		{"xmalloc", "load", "main"},
		{"xmalloc", "load", "run", "main"},
		{"strdup", "main"},
		{"xmalloc", "parse"},
		nil,
	})
	want := []string{
		"xmalloc ← parse ← main",
		"xmalloc ← load ← main",
		"xmalloc ← … ← run",
		"strdup",
		"xmalloc ← parse",
		"",
	}
	if !slices.Equal(got, want) {
		t.Errorf("DistinctLabels:\n got %q\nwant %q", got, want)
	}
}
