package viewconn

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAcceptGivesTheViewer(t *testing.T) {
	out := &syncWriter{}
	cancel := make(chan struct{})
	addrs := make(chan string, 1)
	go func() {
		for i := 0; i < 200; i++ {
			if s := out.String(); strings.Contains(s, "memview ") {
				addrs <- strings.TrimSuffix(strings.TrimSpace(s[strings.LastIndex(s, "memview ")+8:]), ")")
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		close(addrs)
	}()
	done := make(chan net.Conn, 1)
	go func() {
		c, err := Accept("127.0.0.1:0", out, cancel, nil)
		if err != nil {
			t.Error(err)
		}
		done <- c
	}()
	addr, ok := <-addrs
	if !ok {
		t.Fatal("Accept never said where to connect")
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := <-done
	if s == nil {
		t.Fatal("no connection")
	}
	s.Write([]byte("x"))
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil || b[0] != 'x' {
		t.Fatalf("the viewer did not get the log's bytes: %v %q", err, b)
	}
	s.Close()
}

func TestAcceptCancelledAndIgnored(t *testing.T) {
	cancel := make(chan int, 2)
	cancel <- 3 // ignored: the wait goes on
	cancel <- 2
	_, err := Accept("127.0.0.1:0", io.Discard, cancel, func(v int) bool { return v == 3 })
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	if len(cancel) != 0 {
		t.Fatal("the ignored value was not consumed")
	}
}

func TestAcceptTakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Accept(ln.Addr().String(), io.Discard, make(chan struct{}), nil)
	if err == nil || !strings.Contains(err.Error(), "pick a free port") {
		t.Fatalf("err = %v, want a listen error that says what to do", err)
	}
}

type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
