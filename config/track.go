package config

import (
	"fmt"
	"strings"
)

// Track is the set of kinds of resource to trace (--track, track=,
// MEMTRACE_TRACK).
type Track uint8

// The --track words, in the order String writes them.
const (
	TrackMalloc Track = 1 << iota // the malloc family, new/delete, strdup...
	TrackMmap                     // anonymous mmap/munmap/mremap
	TrackFD                       // file descriptors
	TrackDmabuf                   // dma-heap buffers
	TrackION                      // ION buffers

	trackAll = TrackMalloc | TrackMmap | TrackFD | TrackDmabuf | TrackION
)

// DefaultTrack is what memtrace traces when nothing says otherwise: the
// allocations that the memtrack log format was made for.
const DefaultTrack = TrackMalloc | TrackMmap

var trackWords = []struct {
	word string
	bit  Track
}{
	{"malloc", TrackMalloc},
	{"mmap", TrackMmap},
	{"fd", TrackFD},
	{"dmabuf", TrackDmabuf},
	{"ion", TrackION},
}

// TrackWords lists the accepted words, for help texts.
const TrackWords = "malloc,mmap,fd,dmabuf,ion"

// ParseTrack reads a comma-separated list of track words. Spaces around
// words are ignored; an unknown or missing word is an error that lists the
// accepted ones.
func ParseTrack(s string) (Track, error) {
	var t Track
	if strings.TrimSpace(s) == "" {
		return 0, fmt.Errorf("empty track list: give a comma-separated list of %s", TrackWords)
	}
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		if w == "" {
			return 0, fmt.Errorf("track list %q has an empty word: give a comma-separated list of %s", s, TrackWords)
		}
		bit := Track(0)
		for _, tw := range trackWords {
			if tw.word == w {
				bit = tw.bit
				break
			}
		}
		if bit == 0 {
			return 0, fmt.Errorf("unknown track word %q: use a comma-separated list of %s", w, TrackWords)
		}
		t |= bit
	}
	return t, nil
}

// Has reports whether every kind in x is tracked.
func (t Track) Has(x Track) bool { return t&x == x }

// Any reports whether at least one kind in x is tracked.
func (t Track) Any(x Track) bool { return t&x != 0 }

// String writes t as ParseTrack reads it.
func (t Track) String() string {
	var words []string
	for _, tw := range trackWords {
		if t&tw.bit != 0 {
			words = append(words, tw.word)
		}
	}
	return strings.Join(words, ",")
}
