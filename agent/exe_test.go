package agent

import "testing"

func TestExeBeside(t *testing.T) {
	for _, c := range []struct{ comm, exe, want string }{
		{"redis-server", "/usr/bin/redis-check-rdb", "/usr/bin/redis-check-rdb"},
		{"app", "/opt/app", ""},
		// The kernel keeps 15 bytes of the name.
		{"a-very-long-pro", "/bin/a-very-long-program", ""},
		{"a-very-long-pro", "/bin/a-very-long-other", "/bin/a-very-long-other"},
		{"a-very-long-nam", "/bin/another-long-program", "/bin/another-long-program"},
		{"app", "", ""},
		{"", "/bin/app", ""},
	} {
		if got := ExeBeside(c.comm, c.exe); got != c.want {
			t.Errorf("ExeBeside(%q, %q) = %q, want %q", c.comm, c.exe, got, c.want)
		}
	}
}
