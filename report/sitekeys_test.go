package report

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// Sites keyed by the ids of their frames' names rank as their keys' text
// would: compareKeys agrees with comparing the joined names, also where a
// name is a prefix of another (0x12 and 0x123) or holds the joining ';',
// and groupKey is the name of the key's first part.
func TestSiteKeysCompareAsText(t *testing.T) {
	names := []string{"0x12", "0x123", "0x12;", "a(f)", "a(f)x", "a(f;g)", "a(f", "", "b", ";", "\x00malloc"}
	r := rand.New(rand.NewPCG(3, 4))
	st := newSiteTable(true, nil)
	var ids []int32
	for range 3000 {
		seq := make([]uint32, 1+r.IntN(4))
		for k := range seq {
			seq[k] = st.name([]byte(names[r.IntN(len(names))]))
		}
		id := st.intern(seq, func() *site { return &site{} }, nil)
		if int(id) == len(ids) {
			ids = append(ids, id)
		}
	}
	if len(ids) < 1000 {
		t.Fatalf("only %d distinct sites", len(ids))
	}
	for range 100_000 {
		a, b := ids[r.IntN(len(ids))], ids[r.IntN(len(ids))]
		ka, kb := st.key(a), st.key(b)
		if got, want := st.compareKeys(a, b), strings.Compare(ka, kb); got != want {
			t.Fatalf("compareKeys(%q, %q) = %d, want %d", ka, kb, got, want)
		}
	}
	for _, id := range ids {
		want, _, _ := strings.Cut(st.key(id), ";")
		if got := st.names.Get(st.groupKey(id)); got != want {
			t.Fatalf("groupKey of %q is %q, want %q", st.key(id), got, want)
		}
	}
}
