package binlog

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// scriptConn answers each Read with the next of sizes bytes at once.
type scriptConn struct {
	net.Conn
	sizes []int
}

func (c *scriptConn) Read(b []byte) (int, error) {
	n := c.sizes[0]
	c.sizes = c.sizes[1:]
	return min(n, len(b)), nil
}

func (c *scriptConn) SetReadDeadline(time.Time) error { return nil }

// A follow's reads at the stream's tail (small answers) are paced: the
// next read waits until the pace after a small one returned; a full
// answer (a follow that is behind) and the handshake's reads (before
// streaming) are not waited after. The waits are noted, not slept.
func TestIdleConnPacesTheTail(t *testing.T) {
	const pace = time.Hour
	for _, c := range []struct {
		name      string
		sizes     []int
		streaming bool
		paced     []bool // whether read i+1 waited after read i
	}{
		{"tail", []int{100, 200, 50}, true, []bool{true, true}},
		{"behind, then the tail", []int{64 << 10, 64 << 10, 300, 64 << 10}, true, []bool{false, false, true}},
		{"handshake", []int{100, 200, 50}, false, []bool{false, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := &scriptConn{sizes: c.sizes}
			var stalled, streaming atomic.Bool
			streaming.Store(c.streaming)
			var waited time.Duration
			conn := &idleConn{Conn: sc, limit: time.Second, stalled: &stalled, pace: pace, streaming: &streaming,
				sleep: func(d time.Duration) { waited = d }}
			buf := make([]byte, 64<<10)
			for i := range c.sizes {
				waited = 0
				if _, err := conn.Read(buf); err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					continue
				}
				// About an hour when paced (the reads are microseconds apart).
				if got, want := waited > pace-time.Minute, c.paced[i-1]; got != want {
					t.Errorf("read %d waited %v: paced %v, want %v", i, waited, got, want)
				}
			}
		})
	}
}
