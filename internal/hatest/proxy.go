package hatest

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards every TCP connection made to its loopback address to
// Target, and can blackhole them while keeping them open, in one of two
// ways (Mode):
//
//   - Drop (the default): every byte read from either side is dropped
//     instead of forwarded, and new connections are accepted and dialled
//     but pass nothing. That is what etcd's own test proxy
//     (go.etcd.io/etcd/pkg/v3/proxy) does with BlackholeTx and BlackholeRx
//     together; that module is not among dpfl's dependencies, so this
//     small one stands in for it. After Restore the streams that were
//     open have lost bytes mid-frame: the HTTP/2 connection under an
//     etcd client stays open but garbled, and its requests may keep
//     failing (RST_STREAM PROTOCOL_ERROR) until something closes it.
//   - Hold: nothing is read while blackholed, so TCP's flow control
//     stalls both sides, and what was sent is delivered after Restore,
//     late but whole: a network partition that TCP rides out.
type Proxy struct {
	Target string
	// Mode is how Blackhole cuts the link (set before use).
	Mode BlackholeMode

	ln         net.Listener
	blackholed atomic.Bool
	shut       atomic.Bool  // Close was called
	dropped    atomic.Int64 // bytes dropped while blackholed
	forwarded  atomic.Int64 // bytes forwarded

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// BlackholeMode is how a Proxy cuts its link: Drop or Hold.
type BlackholeMode int

const (
	// Drop discards what crosses, as etcd's test proxy does.
	Drop BlackholeMode = iota
	// Hold stops reading, and delivers it all after Restore.
	Hold
)

func (m BlackholeMode) String() string {
	if m == Hold {
		return "hold"
	}
	return "drop"
}

// NewProxy listens on a free loopback port and forwards to target
// (host:port).
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Blackhole cuts the link both ways (dropping or holding, per Mode).
func (p *Proxy) Blackhole() { p.blackholed.Store(true) }

// Restore forwards again.
func (p *Proxy) Restore() { p.blackholed.Store(false) }

// Blackholed reports whether the link is cut now.
func (p *Proxy) Blackholed() bool { return p.blackholed.Load() }

// Dropped and Forwarded count the bytes the proxy dropped and passed.
func (p *Proxy) Dropped() int64   { return p.dropped.Load() }
func (p *Proxy) Forwarded() int64 { return p.forwarded.Load() }

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	p.shut.Store(true)
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// track adds c to the open connections (false once closed).
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(in) {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(in)
			out, err := net.DialTimeout("tcp", p.Target, 2*time.Second)
			if err != nil {
				return // the target is down: the client sees its connection close
			}
			if !p.track(out) {
				return
			}
			defer p.untrack(out)
			done := make(chan struct{}, 2)
			go func() { p.pipe(out, in); done <- struct{}{} }()
			go func() { p.pipe(in, out); done <- struct{}{} }()
			<-done // one side ended: end both
		}()
	}
}

// pipe copies src to dst, dropping what it reads while blackholed in
// Drop mode, and reading nothing while blackholed in Hold mode.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		if !p.hold() {
			return
		}
		n, err := src.Read(buf)
		if n > 0 {
			if !p.hold() { // read as the hold began: deliver it after
				return
			}
			if p.Mode == Drop && p.blackholed.Load() {
				p.dropped.Add(int64(n))
			} else {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
				p.forwarded.Add(int64(n))
			}
		}
		if err != nil {
			return // EOF or an error: the caller closes both sides
		}
	}
}

// hold waits while a Hold-mode blackhole lasts; false once the proxy is
// closed.
func (p *Proxy) hold() bool {
	for p.Mode == Hold && p.blackholed.Load() && !p.shut.Load() {
		time.Sleep(5 * time.Millisecond)
	}
	return !p.shut.Load()
}
