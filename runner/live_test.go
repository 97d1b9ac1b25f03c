package runner

import (
	"bytes"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestServedAddr: --http's line names the address as given (0.0.0.0 stays
// 0.0.0.0, not Go's [::]; a port alone is 127.0.0.1's) with the port the
// kernel bound for port 0, one a client reaches (issue 33).
func TestServedAddr(t *testing.T) {
	for _, c := range []struct{ given, host string }{
		{"0.0.0.0:0", "0.0.0.0"},
		{"127.0.0.1:0", "127.0.0.1"},
		{"0", "127.0.0.1"},
		{":0", "127.0.0.1"},
	} {
		var stderr bytes.Buffer
		lr, _, err := startLive(&Options{HTTP: c.given}, func() int { return 0 }, &stderr)
		if err != nil {
			t.Fatalf("--http %s: %v", c.given, err)
		}
		line, _, _ := strings.Cut(stderr.String(), "\n")
		m := regexp.MustCompile(`^memtrace: serving http://(.*):(\d+)/ `).FindStringSubmatch(line)
		if m == nil || m[1] != c.host || m[2] == "0" {
			t.Errorf("--http %s: %q, want http://%s:PORT/ with the bound port", c.given, line, c.host)
		} else {
			dial := m[1]
			if dial == "0.0.0.0" {
				dial = "127.0.0.1"
			}
			conn, err := net.DialTimeout("tcp", net.JoinHostPort(dial, m[2]), 5*time.Second)
			if err != nil {
				t.Errorf("--http %s: the port printed is not the one served: %v", c.given, err)
			} else {
				conn.Close()
			}
		}
		lr.close()
	}
}
