package viewconn

import (
	"errors"
	"fmt"
	"io"
	"net"
)

// ErrInterrupted: the wait ended because of cancel, with no viewer.
var ErrInterrupted = errors.New("interrupted while waiting for a viewer; the program did not run")

// Accept listens on addr, says on stderr where to connect, and waits for
// the first viewer or for a value on cancel that ignore does not pass over
// (ignore may be nil). The listener is closed either way: one viewer.
func Accept[T any](addr string, stderr io.Writer, cancel <-chan T, ignore func(T) bool) (net.Conn, error) {
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
		case v := <-cancel:
			if ignore != nil && ignore(v) {
				continue
			}
			ln.Close()
			if a := <-ch; a.c != nil {
				a.c.Close()
			}
			return nil, ErrInterrupted
		}
	}
}
