package e2e

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP forwarder on loopback in front of one address (a member's
// mysqld), which a scenario can switch into a black hole: what a peer sees of
// a node whose network is cut, as opposed to one whose server is down.
//
// Forwarding, it relays bytes both ways. Black-holed, it still accepts
// connections (so a dial never fails fast with a refusal, as it would if
// nothing listened) and forwards nothing: a new connection is not passed on,
// and every open one stalls, including its close, so the other side sees
// neither data nor FIN nor reset and waits for its own timeout. Healed, the
// stalled connections resume, with whatever was held back, as TCP
// connections survive a short partition; a connection accepted meanwhile is
// passed on then (its client has usually given up and closed it by then).
type Proxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	changed   *sync.Cond // broadcast on every change of blackhole or closed
	blackhole bool
	closed    bool
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup
}

// StartProxy listens on a free loopback port and forwards to target; it is
// closed, with every connection through it, when the test ends.
func StartProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("proxy for %s: %v", target, err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.changed = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// BlackHole stops all forwarding until Heal.
func (p *Proxy) BlackHole() { p.set(true) }

// Heal resumes forwarding.
func (p *Proxy) Heal() { p.set(false) }

func (p *Proxy) set(blackhole bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = blackhole
	p.changed.Broadcast()
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.changed.Broadcast()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// open waits while the proxy is black-holed and reports whether it may
// forward (false once it is closed).
func (p *Proxy) open() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.blackhole && !p.closed {
		p.changed.Wait()
	}
	return !p.closed
}

// track registers c, to be closed by Close; false when already closed.
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
	defer p.mu.Unlock()
	delete(p.conns, c)
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve relays one client connection once the proxy forwards.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	if !p.open() {
		return
	}
	server, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		// Nothing listens behind the proxy: reset the client's connection,
		// the nearest a proxy comes to a refusal.
		if tc, ok := client.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client); done <- struct{}{} }()
	go func() { p.pipe(client, server); done <- struct{}{} }()
	<-done
	// One direction ended: close both, which ends the other.
	client.Close()
	server.Close()
	<-done
}

// pipe copies src to dst, holding every chunk (and the end of src) back
// while the proxy is black-holed.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if !p.open() {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
