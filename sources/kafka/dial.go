package kafka

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// firstFrameMax bounds the first answer of a connection: the broker's
// ApiVersions response, about 1 KiB from Kafka 4 (some 90 request types
// and a few features). A peer whose first four bytes read as a larger
// length does not speak Kafka: an SSH banner ("SSH-") reads as 1.4 GB, a
// MySQL greeting as 1.2–1.9 GB, an HTTP answer ("HTTP") as 1.2 GB, a TLS
// alert to a plaintext client as 352 MB.
const firstFrameMax = 1 << 20

// minFrame is the smallest answer Kafka sends: a correlation id.
const minFrame = 4

// NotKafkaError is a broker address whose peer answered with bytes that
// are not a Kafka response: another service listens there (a MySQL port,
// SSH, HTTP), or it speaks TLS where plaintext was configured, or the
// reverse. No buffer is sized by those bytes.
type NotKafkaError struct {
	// Addr is the broker address dialled.
	Addr string
	// First are the first bytes the peer sent (at most 24).
	First []byte
	// Length is what the first four bytes say as a Kafka length.
	Length int64
	// Limit is the largest length a Kafka answer could have there.
	Limit int64
}

func (e *NotKafkaError) Error() string {
	return fmt.Sprintf("%s does not speak Kafka: it answered %q, which as a Kafka response would be %d bytes long (at most %d expected); another service listens there, or TLS is on at one end only: check kafka.brokers / --brokers and kafka.tls",
		e.Addr, e.First, e.Length, e.Limit)
}

// Timeout implements net.Error: the answer was wrong, not late.
func (e *NotKafkaError) Timeout() bool { return false }

// Temporary implements net.Error.
func (e *NotKafkaError) Temporary() bool { return false }

// dialer connects to brokers for sarama (Config.Net.Proxy): a TCP dial
// bounded by the timeout, the TLS handshake (when kafka.tls is on) bounded
// by it too, and a frameConn over the result, so that every answer's
// length is checked before sarama reads it. sarama's own TLS is off: the
// frames are checked above TLS.
type dialer struct {
	timeout time.Duration
	tls     *tls.Config

	mu sync.Mutex
	// notKafka is the last *NotKafkaError of each address: sarama retries
	// and reports its last attempt ("broker not connected"), so the reader
	// asks the dialer why a broker could not be used.
	notKafka map[string]*NotKafkaError
}

// seen records e.
func (d *dialer) seen(e *NotKafkaError) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.notKafka == nil {
		d.notKafka = map[string]*NotKafkaError{}
	}
	d.notKafka[e.Addr] = e
}

// notKafkaErr returns what the peers that do not speak Kafka sent, in the
// order of addrs, nil when none did.
func (d *dialer) notKafkaErr(addrs []string) *NotKafkaError {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, a := range addrs {
		if e := d.notKafka[a]; e != nil {
			return e
		}
	}
	for _, e := range d.notKafka {
		return e
	}
	return nil
}

// Dial implements golang.org/x/net/proxy.Dialer.
func (d *dialer) Dial(network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	nd := &net.Dialer{KeepAlive: 30 * time.Second}
	conn, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if d.tls != nil {
		// As sarama names the server: the address's host unless
		// kafka.tls says otherwise.
		tc := d.tls.Clone()
		if tc.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				tc.ServerName = host
			}
		}
		tconn := tls.Client(conn, tc)
		if err := tconn.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, &net.OpError{Op: "dial", Net: network, Addr: conn.RemoteAddr(), Err: fmt.Errorf("TLS handshake: %w", err)}
		}
		return newFrameConn(tconn, addr, d.seen), nil
	}
	return newFrameConn(conn, addr, d.seen), nil
}

// frameConn checks the framing of what a broker sends before sarama reads
// it: every answer is a four-byte big-endian length and that many bytes.
// The first answer is at most firstFrameMax bytes long, any later one at
// most sarama.MaxResponseSize. A length out of bounds fails the read (and
// every later one) with a *NotKafkaError and closes the connection.
type frameConn struct {
	net.Conn
	mu     sync.Mutex
	fc     frameCheck
	report func(*NotKafkaError)
}

func newFrameConn(c net.Conn, addr string, report func(*NotKafkaError)) *frameConn {
	return &frameConn{Conn: c, fc: frameCheck{addr: addr}, report: report}
}

// Read implements net.Conn.
func (c *frameConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	err := c.fc.err
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	n, rerr := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		err = c.fc.check(p[:n])
		c.mu.Unlock()
		if err != nil {
			_ = c.Conn.Close()
			if nk, ok := err.(*NotKafkaError); ok && c.report != nil {
				c.report(nk)
			}
			return 0, err
		}
	}
	return n, rerr
}

// Write implements net.Conn: nothing is sent to a peer that does not speak
// Kafka.
func (c *frameConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	err := c.fc.err
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// frameCheck follows the frames of a stream of Kafka answers.
type frameCheck struct {
	addr string
	// frames is the number of frames whose length was read.
	frames int
	// hdr holds the length bytes read so far of the next frame.
	hdr  [4]byte
	nhdr int
	// left is what remains of the current frame's body.
	left int64
	// first keeps the first bytes of the stream, for the error.
	first []byte
	err   error
}

// check follows b, the next bytes of the stream; it returns (and keeps) a
// *NotKafkaError at the first length out of bounds.
func (f *frameCheck) check(b []byte) error {
	if f.err != nil {
		return f.err
	}
	if len(f.first) < 24 {
		f.first = append(f.first, b[:min(len(b), 24-len(f.first))]...)
	}
	for len(b) > 0 {
		if f.left > 0 {
			k := min(int64(len(b)), f.left)
			f.left -= k
			b = b[k:]
			continue
		}
		k := copy(f.hdr[f.nhdr:], b)
		f.nhdr += k
		b = b[k:]
		if f.nhdr < len(f.hdr) {
			return nil
		}
		n := int64(int32(binary.BigEndian.Uint32(f.hdr[:])))
		limit := int64(sarama.MaxResponseSize)
		if f.frames == 0 {
			limit = firstFrameMax
		}
		if n < minFrame || n > limit {
			f.err = &NotKafkaError{Addr: f.addr, First: f.first, Length: n, Limit: limit}
			return f.err
		}
		f.frames++
		f.nhdr, f.left = 0, n
	}
	return nil
}
