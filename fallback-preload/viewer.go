package preload

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/memtrace/memtrace/internal/viewconn"
)

// viewerAddr is where a viewer connects: Listen (ADDR:PORT, or ADDR with
// Port), else 127.0.0.1:Port, as the library's text mode listens.
func (o Options) viewerAddr() (string, error) {
	if _, err := o.Env(); err != nil {
		return "", err
	}
	host, port := "127.0.0.1", o.Port
	if o.Listen != "" {
		h, p, hasPort := splitListen(o.Listen)
		if n, err := strconv.Atoi(p); hasPort && err == nil && port == 0 {
			port = n
		}
		host = h
		if host == "" {
			host = "0.0.0.0"
		}
	}
	if port == 0 {
		return "", fmt.Errorf("no port to listen on in %q: give ADDR:PORT", o.Listen)
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	if _, _, err := net.SplitHostPort(addr); err != nil || strings.ContainsAny(host, "[]") {
		return "", fmt.Errorf("bad listen address %q: want ADDR:PORT, [V6ADDR]:PORT or ADDR", o.Listen)
	}
	return addr, nil
}

// acceptViewer waits for one viewer on addr, before the program starts (so
// that the viewer sees it from its first allocation), or for a signal
// other than SIGQUIT.
func acceptViewer(addr string, stderr io.Writer, sigs <-chan os.Signal) (net.Conn, error) {
	return viewconn.Accept(addr, stderr, sigs, func(s os.Signal) bool { return s == syscall.SIGQUIT })
}
