package cli

import "strings"

// Suggest returns the name in names nearest to typed when it is near
// enough to be a typo of it (an edit or two, fewer for a short name) or
// typed is the start of exactly one of them; "" otherwise. A single
// letter is never suggested, nor suggested for.
func Suggest(typed string, names []string) string {
	if len(typed) < 2 {
		return ""
	}
	var prefixed []string
	best, bestD := "", 1<<30
	for _, n := range names {
		if len(n) == 1 {
			continue
		}
		if len(typed) >= 3 && len(n) > len(typed) && n[:len(typed)] == typed {
			prefixed = append(prefixed, n)
		}
		if d := distance(typed, n); d < bestD {
			best, bestD = n, d
		}
	}
	limit := 2
	if len(typed) <= 6 {
		limit = 1
	}
	if best != "" && bestD <= limit {
		return best
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	return ""
}

// distance is the Damerau-Levenshtein (optimal string alignment) distance:
// a swapped pair of letters is one typo, not two.
func distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// MemtraceWords are the words memtrace reads as its own in the place of
// PROG: the report, and help and version alone.
var MemtraceWords = []string{"report", "help", "version"}

// SuggestWord returns the word in words that typed (the first word of a
// command line, no program of that name found) was most likely meant to
// be: within an edit, else the only one that typed (two letters or more)
// begins, else within two edits; "" otherwise, and for typed itself (help with arguments is a
// program's name, not a typo).
func SuggestWord(typed string, words []string) string {
	best, bestD := "", 3
	var prefixed []string
	for _, w := range words {
		if w == typed {
			return ""
		}
		if len(typed) >= 2 && strings.HasPrefix(w, typed) {
			prefixed = append(prefixed, w)
		}
		if d := distance(typed, w); d < bestD {
			best, bestD = w, d
		}
	}
	switch {
	case best != "" && bestD <= 1:
		return best
	case len(prefixed) == 1:
		return prefixed[0]
	}
	return best
}
