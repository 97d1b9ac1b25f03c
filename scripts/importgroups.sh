#!/usr/bin/env bash
# importgroups FILE...: lists the Go files whose import blocks are not in
# goimports' groups: the standard library, then third-party modules, then
# this module's own packages, each one block, in that order, separated by
# one blank line. goimports -local sorts within a block and splits a mixed
# one, but it never merges two blocks of the same kind nor reorders blocks,
# so it accepts "std, own, third-party" or an own block split in two; this
# catches those too. Prints "FILE:LINE: why" for a file's first problem; exits 1 if any.
set -euo pipefail
module=$(awk '$1 == "module" { print $2; exit }' "$(dirname "$0")/../go.mod")
out=$(awk -v mod="$module" '
function class(path,   first) {
	if (path == mod || index(path, mod "/") == 1)
		return 2
	first = path
	sub(/\/.*/, "", first)
	return index(first, ".") ? 1 : 0
}
FNR == 1 { inblock = 0 }
/^import \($/ { inblock = 1; group = 0; prev = -1; cur = -1; next }
inblock && /^\)/ { inblock = 0; next }
inblock && /^[ \t]*$/ { if (cur >= 0) { prev = cur; cur = -1; group++ }; next }
inblock {
	if (!match($0, /"[^"]*"/))
		next
	c = class(substr($0, RSTART + 1, RLENGTH - 2))
	name[0] = "standard library"; name[1] = "third-party"; name[2] = "own (" mod ")"
	if (FILENAME in seen)
		next
	if (cur >= 0 && c != cur)
		seen[FILENAME] = 1
	else if (cur < 0 && prev >= 0 && c <= prev)
		seen[FILENAME] = 1
	if (cur >= 0 && c != cur)
		printf "%s:%d: %s import in a %s group\n", FILENAME, FNR, name[c], name[cur]
	else if (cur < 0 && prev >= 0 && c <= prev)
		printf "%s:%d: %s group after a %s group\n", FILENAME, FNR, name[c], name[prev]
	if (cur < 0)
		cur = c
}
' "$@")
if [ -n "$out" ]; then
	echo "$out"
	exit 1
fi
