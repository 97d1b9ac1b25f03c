package cli

//go:generate go run ./gendocs ../..

// Generated maps each generated file, by its path from the repository's
// root, to its text: the man pages and the completions. keys are memview's
// help lines (viewer.HelpLines), its man page's KEYS: the caller passes
// them, so that the commands that import this package do not link the
// viewer. gendocs writes them; TestGeneratedFresh compares the committed
// ones.
func Generated(keys []string) map[string]string {
	out := map[string]string{}
	for _, c := range Commands {
		var k []string
		if c == Memview {
			k = keys
		}
		out["docs/man/"+c.ManName+".1"] = Man(c, k)
	}
	out["completions/memtrace.bash"] = Bash(Memtrace, Report)
	out["completions/memview.bash"] = Bash(Memview, nil)
	out["completions/_memtrace"] = Zsh(Memtrace, Report)
	out["completions/_memview"] = Zsh(Memview, nil)
	out["completions/memtrace.fish"] = Fish(Memtrace, Report)
	out["completions/memview.fish"] = Fish(Memview, nil)
	return out
}
