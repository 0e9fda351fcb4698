package testenv

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// StallProxy is a TCP proxy on 127.0.0.1 that forwards what the client
// sends, and the first After bytes of what the server answers on each
// connection; then it stops forwarding the server's bytes and holds the
// connection open: a server (or a network) that stops answering in the
// middle of a handshake, a query or a fetch. After < 0 forwards everything.
type StallProxy struct {
	// Addr is the proxy's listen address ("127.0.0.1:port").
	Addr string
	// After is how many bytes of each server answer stream are forwarded.
	After int

	ln      net.Listener
	target  string
	stalled chan struct{}
	once    sync.Once
	mu      sync.Mutex
	closed  bool
	conns   []net.Conn
	wg      sync.WaitGroup
}

// NewStallProxy starts a StallProxy to target and closes it when the test
// ends.
func NewStallProxy(t testing.TB, target string, after int) *StallProxy {
	t.Helper()
	p, err := StartStallProxy(target, after)
	if err != nil {
		t.Fatalf("testenv: stall proxy: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// StartStallProxy starts a StallProxy to target; Close stops it.
func StartStallProxy(target string, after int) (*StallProxy, error) {
	return StartStallProxyAt("127.0.0.1:0", target, after)
}

// StartStallProxyAt is StartStallProxy listening on addr: a proxy closed
// and started again at its old Addr is a server that went down and came
// back (clients keep their address, as they keep a DSN).
func StartStallProxyAt(addr, target string, after int) (*StallProxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &StallProxy{Addr: ln.Addr().String(), After: after, ln: ln, target: target, stalled: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Stalled is closed once a connection has stalled (After bytes of its
// server's answer were forwarded and more arrived).
func (p *StallProxy) Stalled() <-chan struct{} { return p.stalled }

// Close stops the proxy and closes every connection it holds.
func (p *StallProxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *StallProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *StallProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c) || !p.track(u) {
			_ = c.Close()
			_ = u.Close()
			return
		}
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(u, c)
			_ = u.Close()
		}()
		go func() {
			defer p.wg.Done()
			p.forward(c, u)
		}()
	}
}

// forward copies the server's answer u to the client c up to After bytes,
// then reads and drops the rest until either side closes.
func (p *StallProxy) forward(c, u net.Conn) {
	if p.After < 0 {
		_, _ = io.Copy(c, u)
		_ = c.Close()
		return
	}
	left := p.After
	buf := make([]byte, 32<<10)
	for {
		n, err := u.Read(buf)
		if n > 0 {
			w := min(n, left)
			if w > 0 {
				if _, werr := c.Write(buf[:w]); werr != nil {
					return
				}
				left -= w
			}
			if n > w {
				p.once.Do(func() { close(p.stalled) })
			}
		}
		if err != nil {
			if !errors.Is(err, net.ErrClosed) && left > 0 {
				_ = c.Close()
			}
			return
		}
	}
}

// BannerServer listens on 127.0.0.1 and greets every connection with
// banner, then reads and drops what the client sends, holding the
// connection open until the test ends: a service that speaks another
// protocol (an SSH server's "SSH-2.0-..." line). It returns the address.
func BannerServer(t testing.TB, banner []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: banner server: %v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.Write(banner); err == nil {
					_, _ = io.Copy(io.Discard, c)
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// SSHBanner is what an OpenSSH server sends first.
const SSHBanner = "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n"
