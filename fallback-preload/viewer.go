package preload

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
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

// errNoViewer ends Run with status 130 when a signal came while it waited
// for the viewer: the program was never started.
type errNoViewer struct{}

func (errNoViewer) Error() string {
	return "interrupted while waiting for a viewer; the program did not run"
}

// acceptViewer waits for one viewer on addr, before the program starts (so
// that the viewer sees it from its first allocation), or for a signal.
func acceptViewer(addr string, stderr io.Writer, sigs <-chan os.Signal) (net.Conn, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w: pick a free port", addr, err)
	}
	defer ln.Close()
	fmt.Fprintf(stderr, "memtrace: waiting for a viewer on %s (memview %s)\n", ln.Addr(), ln.Addr())
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		ch <- accepted{c, err}
	}()
	for {
		select {
		case a := <-ch:
			if a.err != nil {
				return nil, fmt.Errorf("accept a viewer on %s: %w", addr, a.err)
			}
			return a.c, nil
		case s := <-sigs:
			if s == syscall.SIGQUIT {
				continue
			}
			ln.Close()
			if a := <-ch; a.c != nil {
				a.c.Close()
			}
			return nil, errNoViewer{}
		}
	}
}
