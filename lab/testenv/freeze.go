package testenv

import (
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Freezer stops a kfake cluster from answering, as a broker does that
// hangs or a network path that goes black (a TCP proxy that stops
// forwarding): while frozen, every connection of the cluster keeps what it
// was sent unread and sends nothing back; Thaw delivers it all, in order,
// as a resumed path does. Clients see no error, only silence, so only
// their own timeouts can end what they wait for.
type Freezer struct {
	mu     sync.Mutex
	frozen bool
	thawed *sync.Cond
}

// NewFreezableKafka is NewKafka whose cluster f can freeze.
func NewFreezableKafka(t testing.TB, topics map[string]int32) (*Kafka, *Freezer) {
	t.Helper()
	f := &Freezer{}
	f.thawed = sync.NewCond(&f.mu)
	k := NewKafkaWith(t, topics, kfake.ListenFn(func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		return &freezeListener{Listener: ln, f: f}, nil
	}))
	t.Cleanup(f.Thaw) // let the cluster's connections end
	return k, f
}

// Freeze stops the cluster from reading requests and writing answers.
func (f *Freezer) Freeze() {
	f.mu.Lock()
	f.frozen = true
	f.mu.Unlock()
}

// Thaw lets everything held through.
func (f *Freezer) Thaw() {
	f.mu.Lock()
	f.frozen = false
	f.thawed.Broadcast()
	f.mu.Unlock()
}

// Wait blocks while frozen.
func (f *Freezer) Wait() {
	f.mu.Lock()
	for f.frozen {
		f.thawed.Wait()
	}
	f.mu.Unlock()
}

type freezeListener struct {
	net.Listener
	f *Freezer
}

func (l *freezeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &freezeConn{Conn: c, f: l.f}, nil
}

// freezeConn is the broker's side of a connection: a read that returns
// while frozen holds its bytes until the thaw, and a write waits for it.
type freezeConn struct {
	net.Conn
	f *Freezer
}

func (c *freezeConn) Read(b []byte) (int, error) {
	c.f.Wait()
	n, err := c.Conn.Read(b)
	c.f.Wait()
	return n, err
}

func (c *freezeConn) Write(b []byte) (int, error) {
	c.f.Wait()
	return c.Conn.Write(b)
}
