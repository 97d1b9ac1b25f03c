package cli

//go:generate go run ./gendocs ../..

// Generated maps each generated file, by its path from the repository's
// root, to its text: the man pages and the completions. gendocs writes
// them; TestGeneratedFresh compares the committed ones.
func Generated() map[string]string {
	out := map[string]string{}
	for _, c := range Commands {
		out["docs/man/"+c.ManName+".1"] = Man(c)
	}
	out["completions/memtrace.bash"] = Bash(Memtrace, Report)
	out["completions/memview.bash"] = Bash(Memview, nil)
	out["completions/_memtrace"] = Zsh(Memtrace, Report)
	out["completions/_memview"] = Zsh(Memview, nil)
	out["completions/memtrace.fish"] = Fish(Memtrace, Report)
	out["completions/memview.fish"] = Fish(Memview, nil)
	return out
}
