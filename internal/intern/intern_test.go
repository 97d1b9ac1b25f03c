package intern

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// Seqs gives each distinct sequence one id, the same one again, also
// after Compact, and keeps each sequence as it was given.
func TestSeqs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s := NewSeqs()
	ids := map[string]uint32{"[]": 0}
	var seqs [][]uint32
	for i := range 50_000 {
		seq := make([]uint32, r.IntN(4))
		for k := range seq {
			seq[k] = uint32(r.IntN(20))
		}
		if i == 30_000 {
			s.Compact()
		}
		id := s.Intern(seq)
		key := fmt.Sprint(seq)
		if want, ok := ids[key]; ok && want != id {
			t.Fatalf("%v: id %d, was %d", seq, id, want)
		} else if !ok {
			if int(id) != len(ids) {
				t.Fatalf("%v: new id %d, want %d", seq, id, len(ids))
			}
			ids[key] = id
			seqs = append(seqs, seq)
		}
	}
	if s.Len() != len(ids) {
		t.Fatalf("%d sequences, want %d", s.Len(), len(ids))
	}
	for _, seq := range seqs {
		id, ok := s.Find(seq)
		if !ok || !slices.Equal(s.Get(id), seq) {
			t.Fatalf("%v: found %d %v as %v", seq, id, ok, s.Get(id))
		}
	}
	if _, ok := s.Find([]uint32{99}); ok {
		t.Fatal("found a sequence never interned")
	}
}

func TestStrings(t *testing.T) {
	s := NewStrings()
	for round := range 2 {
		for i := range 30_000 {
			if i == 20_000 {
				s.Compact()
			}
			text := fmt.Sprintf("frame-%d", i%7000)
			if i%7000 == 6999 {
				text = "" // the empty string is one too
			}
			if i%5000 == 0 {
				text += string(make([]byte, 300<<10)) // longer than a chunk
			}
			id := s.Intern([]byte(text))
			if s.Get(id) != text {
				t.Fatalf("round %d: %q came back as %q", round, text, s.Get(id))
			}
		}
	}
	if s.Len() != 7000+6 {
		t.Fatalf("%d strings, want %d", s.Len(), 7006)
	}
}
