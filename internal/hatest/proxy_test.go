package hatest

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// echoServer answers every line with the same line, until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// A blackholed proxy keeps its connections open and passes nothing either
// way (what was sent meanwhile is lost); once restored the same
// connection carries data again, and new connections work.
func TestProxyBlackhole(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip := func(msg string, wait time.Duration) (string, error) {
		if _, err := io.WriteString(c, msg+"\n"); err != nil {
			return "", err
		}
		c.SetReadDeadline(time.Now().Add(wait))
		return r.ReadString('\n')
	}
	if got, err := roundTrip("one", 2*time.Second); err != nil || got != "one\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}

	p.Blackhole()
	if got, err := roundTrip("lost", 300*time.Millisecond); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("blackholed: read %q, %v; want a timeout", got, err)
	}
	// A connection made during the blackhole connects, and passes nothing.
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("dial while blackholed: %v", err)
	}
	defer c2.Close()
	io.WriteString(c2, "also lost\n")
	c2.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c2.Read(make([]byte, 10)); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("new connection while blackholed read %d bytes, %v", n, err)
	}
	if p.Dropped() == 0 {
		t.Fatal("nothing counted as dropped")
	}

	p.Restore()
	if got, err := roundTrip("two", 2*time.Second); err != nil || got != "two\n" {
		t.Fatalf("restored: %q, %v (the bytes sent while blackholed must be gone)", got, err)
	}
	c2.SetReadDeadline(time.Now().Add(2 * time.Second))
	io.WriteString(c2, "three\n")
	if got, err := bufio.NewReader(c2).ReadString('\n'); err != nil || got != "three\n" {
		t.Fatalf("second connection restored: %q, %v", got, err)
	}
}

// Close ends the connections in flight.
func TestProxyClose(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "x\n")
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	p.Close()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("after Close: %v, want the connection closed", err)
	}
}

// In Hold mode nothing crosses while blackholed, and what was sent then
// arrives after Restore, whole and in order.
func TestProxyHold(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	p.Mode = Hold
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	io.WriteString(c, "one\n")
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "one\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	p.Blackhole()
	io.WriteString(c, "held\n")
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if got, err := r.ReadString('\n'); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("held: read %q, %v; want a timeout", got, err)
	}
	p.Restore()
	io.WriteString(c, "two\n")
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	for _, want := range []string{"held\n", "two\n"} {
		if got, err := r.ReadString('\n'); err != nil || got != want {
			t.Fatalf("after Restore: %q, %v; want %q", got, err, want)
		}
	}
	if p.Dropped() != 0 {
		t.Fatalf("Hold dropped %d bytes", p.Dropped())
	}
	p.Blackhole() // Close must not hang on a held connection
}
