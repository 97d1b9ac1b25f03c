// Package cli holds the command lines of memtrace's three commands
// (memtrace, memview, memtrace report): one flag table per command
// (commands.go) from which the parser, --help, the man pages (docs/man)
// and the bash, zsh and fish completions (completions/) all come, so that
// none of them can name an option the others do not. The style is GNU's:
// --long options (-long as well), single letters as -x, a short alias on
// its long option's line, and one-line errors with the nearest spelling.
// gendocs writes the generated files; TestGeneratedFresh and
// scripts/check-generated.sh check them.
package cli
