package binlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// Every connection of a read is bound to its context: go-mysql sets no
// deadline of its own on the handshake or on Conn.Execute, so a server (or
// a proxy) that accepts the connection and stops answering would otherwise
// hold a read forever. The dialer closes the socket when the context ends —
// the read's --timeout or an interrupt — which fails whatever read or write
// is in flight at once (docs/where.md#binlog-evidence).

// boundConn is a net.Conn closed when its context ends.
type boundConn struct {
	net.Conn
	stop func() bool
	once sync.Once
}

// Close stops the context watch and closes the socket.
func (c *boundConn) Close() error {
	var err error
	c.once.Do(func() {
		c.stop()
		err = c.Conn.Close()
	})
	return err
}

// boundDial dials addr and binds the connection to ctx.
func boundDial(ctx context.Context, network, addr string) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	bc := &boundConn{Conn: c}
	bc.stop = context.AfterFunc(ctx, func() { _ = bc.Conn.Close() })
	return bc, nil
}

// connect opens one SQL connection (handshake and authentication included)
// bound to ctx.
func (r *Reader) connect(ctx context.Context, what string) (*client.Conn, error) {
	return r.connectWith(ctx, what, boundDial)
}

// connectWith is connect through dial.
func (r *Reader) connectWith(ctx context.Context, what string, dial client.Dialer) (*client.Conn, error) {
	c, err := client.ConnectWithDialer(ctx, "tcp", r.addr, r.user, r.password, "", dial)
	if err != nil {
		return nil, r.failed(ctx, fmt.Sprintf("connect as %s (%s)", r.user, what), err)
	}
	return c, nil
}

// failed is the error of a step of a read: when ctx ended it, the timeout
// or the interrupt (errors.Is context.Canceled), never the closed socket's
// own error.
func (r *Reader) failed(ctx context.Context, what string, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("binlog of %s: %s: no answer within the %s timeout (--timeout)", r.addr, what, r.Timeout)
	case ctx.Err() != nil:
		return fmt.Errorf("binlog of %s: %s: %w", r.addr, what, ctx.Err())
	}
	return fmt.Errorf("binlog of %s: %s: %v", r.addr, what, scrub(err, r.password))
}

// query runs one statement on c, bound to ctx (c's socket is).
func (r *Reader) query(ctx context.Context, c *client.Conn, what, q string, args ...any) (*gomysql.Result, error) {
	res, err := c.Execute(q, args...)
	if err != nil {
		return nil, r.failed(ctx, what, err)
	}
	return res, nil
}

// stream is one COM_BINLOG_DUMP: the events of the binlog from one file on,
// read on the caller's goroutine (no read-ahead), decoded by go-mysql's
// parser with CRC32 checksums verified, ending with io.EOF at the
// binlog's end (BINLOG_DUMP_NON_BLOCK).
type stream struct {
	r      *Reader
	ctx    context.Context
	c      *client.Conn
	parser *replication.BinlogParser
	// file is the binlog file of the last event, pos the position after it.
	file string
	pos  uint32
	// typ is the type of the event being parsed (a rows decoder reads it).
	typ replication.EventType
}

// open starts a dump of file from its first event. decode, when set,
// decodes the rows events (the scan decodes only its tables').
func (r *Reader) open(ctx context.Context, srv *server, file string, decode func(*replication.RowsEvent, []byte) error) (*stream, error) {
	return r.openAt(ctx, srv, dump{file: file, pos: 4, flags: replication.BINLOG_DUMP_NON_BLOCK, dial: boundDial}, decode)
}

// dump is where and how a COM_BINLOG_DUMP starts.
type dump struct {
	file string
	pos  uint32
	// flags: BINLOG_DUMP_NON_BLOCK ends the dump at the binlog's end; 0
	// waits for new events (a follow).
	flags uint16
	// heartbeat, when set, is the period of the server's heartbeat events
	// while it has nothing to send.
	heartbeat time.Duration
	dial      client.Dialer
}

// openAt starts the dump d.
func (r *Reader) openAt(ctx context.Context, srv *server, d dump, decode func(*replication.RowsEvent, []byte) error) (*stream, error) {
	file := d.file
	c, err := r.connectWith(ctx, "replica connection", d.dial)
	if err != nil {
		return nil, err
	}
	s := &stream{r: r, ctx: ctx, c: c, file: file, pos: d.pos}
	fail := func(what string, err error) (*stream, error) {
		c.Close()
		return nil, r.failed(ctx, what, err)
	}
	// A checksum-aware replica (as mysqlbinlog announces itself): the
	// server sends every event with the checksum its file holds; on
	// MariaDB, one that reads GTID events as MariaDB writes them, not
	// MySQL-compatible dummies. One statement: one round trip.
	set := "SET @master_binlog_checksum = @@global.binlog_checksum, @source_binlog_checksum = @@global.binlog_checksum"
	if srv.flavor == gomysql.MariaDBFlavor {
		set += ", @mariadb_slave_capability = 4"
	}
	if d.heartbeat > 0 {
		set += fmt.Sprintf(", @master_heartbeat_period = %d", d.heartbeat.Nanoseconds())
	}
	if _, err := c.Execute(set); err != nil {
		return fail("announce the replica's capabilities", err)
	}
	c.ResetSequence()
	pkt := make([]byte, 4+1+4+2+4+len(file))
	pkt[4] = gomysql.COM_BINLOG_DUMP
	binary.LittleEndian.PutUint32(pkt[5:], d.pos)
	binary.LittleEndian.PutUint16(pkt[9:], d.flags)
	binary.LittleEndian.PutUint32(pkt[11:], r.replicaID())
	copy(pkt[15:], file)
	if err := c.WritePacket(pkt); err != nil {
		return fail("start the dump of "+file, err)
	}
	s.parser = newParser(srv.flavor, decode)
	return s, nil
}

// newParser is go-mysql's event parser as a scan uses it: checksums
// verified, DECIMALs as the server's exact text (never a float), rows
// decoded by decode when set.
func newParser(flavor string, decode func(*replication.RowsEvent, []byte) error) *replication.BinlogParser {
	p := replication.NewBinlogParser()
	p.SetFlavor(flavor)
	p.SetUseDecimal(false)
	p.SetParseTime(false)
	p.SetVerifyChecksum(true)
	p.SetRowsEventDecodeFunc(decode)
	// A table map's optional metadata (column names, ENUM values...) is
	// not needed — positions come from information_schema — and its
	// decoder allocates by counts the event declares: left undecoded.
	p.SetTableMapOptionalMetaDecodeFunc(func([]byte) error { return nil })
	return p
}

// Close ends the dump (the server's dump thread ends when it next writes).
func (s *stream) Close() { s.c.Close() }

// next returns the next event; io.EOF at the binlog's end. An event that
// fails its checksum, cannot be decoded, or a server error (a file cut in
// the middle of an event) is an error naming the file and position.
func (s *stream) next() (*replication.BinlogEvent, error) {
	data, err := s.c.ReadPacket()
	if err != nil {
		return nil, s.r.failed(s.ctx, fmt.Sprintf("read %s after position %d", s.file, s.pos), err)
	}
	switch {
	case len(data) == 0:
		return nil, s.r.failed(s.ctx, "read "+s.file, errors.New("empty packet"))
	case data[0] == gomysql.EOF_HEADER && len(data) < 9:
		return nil, io.EOF
	case data[0] == gomysql.ERR_HEADER:
		hint := ""
		err := s.c.HandleErrorPacket(data)
		var me *gomysql.MyError
		if errors.As(err, &me) && (me.Code == gomysql.ER_SPECIFIC_ACCESS_DENIED_ERROR || me.Code == gomysql.ER_ACCESS_DENIED_ERROR) {
			hint = " (the binlog user needs REPLICATION SLAVE)"
		}
		return nil, fmt.Errorf("binlog of %s: read %s after position %d%s: %v", s.r.addr, s.file, s.pos, hint, scrub(err, s.r.password))
	case data[0] != gomysql.OK_HEADER:
		return nil, fmt.Errorf("binlog of %s: read %s after position %d: not a binlog event (packet starts with 0x%02x)", s.r.addr, s.file, s.pos, data[0])
	}
	return s.parse(data[1:])
}

// parse decodes one event. A malformed event is an error, never a panic
// (go-mysql's decoders index their input unchecked).
func (s *stream) parse(raw []byte) (ev *replication.BinlogEvent, err error) {
	at := s.pos
	defer func() {
		if p := recover(); p != nil {
			ev, err = nil, fmt.Errorf("binlog of %s: the event of %s at position %d cannot be decoded (%v): the file is damaged or not a binlog", s.r.addr, s.file, at, p)
		}
	}()
	h, perr := headerOf(raw)
	if perr != nil {
		return nil, fmt.Errorf("binlog of %s: the event of %s at position %d: %v", s.r.addr, s.file, at, perr)
	}
	s.typ = h.EventType
	if h.EventType == replication.ROTATE_EVENT && h.Flags&replication.LOG_EVENT_ARTIFICIAL_F != 0 {
		// The server's own rotate as it opens a file. It carries the
		// checksum the replica announced, which the parser cannot know
		// before the file's format description: decoded here.
		ev = fakeRotate(h, raw)
		s.advance(ev)
		return ev, nil
	}
	if !sizesOK(h.EventType, raw[replication.EventHeaderSize:]) {
		return nil, fmt.Errorf("binlog of %s: the event of %s at position %d declares more data than it holds: the file is damaged", s.r.addr, s.file, at)
	}
	if h.EventType == replication.FORMAT_DESCRIPTION_EVENT {
		if alg, ok := fdeChecksum(raw); ok && alg == replication.BINLOG_CHECKSUM_ALG_CRC32 && !crcOK(raw) {
			// go-mysql verifies every event but this one.
			return nil, checksumErr(s.r.addr, s.file, at)
		}
	}
	ev, err = s.parser.Parse(raw)
	if err != nil {
		if errors.Is(err, replication.ErrChecksumMismatch) {
			return nil, checksumErr(s.r.addr, s.file, at)
		}
		return nil, fmt.Errorf("binlog of %s: the event of %s at position %d cannot be decoded: %v", s.r.addr, s.file, at, err)
	}
	s.advance(ev)
	return ev, nil
}

func checksumErr(addr, file string, pos uint32) error {
	return &UnavailableError{Addr: addr, Reason: fmt.Sprintf("the event of %s at position %d fails its CRC32 checksum: the binlog file is damaged, and no count is drawn from it", file, pos)}
}

// advance follows the file and position of the stream.
func (s *stream) advance(ev *replication.BinlogEvent) {
	h := ev.Header
	switch e := ev.Event.(type) {
	case *replication.RotateEvent:
		// The stream continues in that file (a rotate the file ends
		// with, or the server's own as it opens a file).
		s.file, s.pos = string(e.NextLogName), uint32(e.Position)
		return
	}
	switch {
	case h.LogPos > 0:
		s.pos = h.LogPos
	case h.Flags&replication.LOG_EVENT_ARTIFICIAL_F == 0:
		s.pos += h.EventSize
	}
}

// start is where ev begins in its file.
func (s *stream) start(ev *replication.BinlogEvent) uint32 {
	if ev.Header.LogPos >= ev.Header.EventSize {
		return ev.Header.LogPos - ev.Header.EventSize
	}
	return s.pos - ev.Header.EventSize
}

// sizesOK checks the counts an event declares before go-mysql allocates by
// them (a GTID list's entries, a previous-GTIDs set's UUIDs, a compressed
// query's size): each must fit the bytes the event holds, or the event is
// damaged, never an allocation of gigabytes.
func sizesOK(t replication.EventType, body []byte) bool {
	switch t {
	case replication.MARIADB_GTID_LIST_EVENT:
		// count (28 bits) entries of domain 4, server 4, sequence 8.
		return len(body) >= 4 && uint64(binary.LittleEndian.Uint32(body)&(1<<28-1))*16 <= uint64(len(body)-4)
	case replication.PREVIOUS_GTIDS_EVENT:
		// UUID count (8 bytes, or 6 of them in the tagged format), then
		// per UUID 16 bytes and an 8-byte interval count at least.
		if len(body) < 8 {
			return false
		}
		n := binary.LittleEndian.Uint64(body)
		if body[7] == 1 {
			n = binary.LittleEndian.Uint64(append(append([]byte{}, body[1:7]...), 0, 0))
		}
		return n <= uint64(len(body)-8)/24
	case replication.MARIADB_QUERY_COMPRESSED_EVENT:
		return queryCompressedOK(body)
	}
	return true
}

// queryCompressedOK checks a MariaDB compressed query event's declared
// size (compressedOK) before go-mysql allocates it: after the header, 13
// bytes of post-header (the schema's length at 8, the status
// variables' at 11), the status variables, the schema and its NUL, then the
// compressed query (and a checksum, counted as compressed bytes: a
// looser bound).
func queryCompressedOK(body []byte) bool {
	if len(body) < 13 {
		return false
	}
	pos := 13 + int(binary.LittleEndian.Uint16(body[11:])) + int(body[8]) + 1
	return pos < len(body) && compressedOK(body[pos:])
}

// fakeRotate decodes the server's rotate event: an 8-byte position and the
// file name, followed by a CRC32 checksum when the replica announced one
// (the name never ends with four bytes that are the CRC32 of the rest).
func fakeRotate(h *replication.EventHeader, raw []byte) *replication.BinlogEvent {
	body := raw[replication.EventHeaderSize:]
	if crcOK(raw) && len(body) >= 8+replication.BinlogChecksumLength {
		body = body[:len(body)-replication.BinlogChecksumLength]
	}
	e := &replication.RotateEvent{}
	if len(body) >= 8 {
		e.Position = binary.LittleEndian.Uint64(body)
		e.NextLogName = body[8:]
	}
	return &replication.BinlogEvent{RawData: raw, Header: h, Event: e}
}

// headerOf decodes an event's common header and checks its size.
func headerOf(raw []byte) (*replication.EventHeader, error) {
	h := new(replication.EventHeader)
	if err := h.Decode(raw); err != nil {
		return nil, err
	}
	if int(h.EventSize) != len(raw) {
		return nil, fmt.Errorf("event size %d, but %d bytes were sent", h.EventSize, len(raw))
	}
	return h, nil
}

// fdeChecksum is the checksum algorithm a format description event
// declares (the byte before its 4-byte checksum), false when the event is
// too short to hold one.
func fdeChecksum(raw []byte) (byte, bool) {
	// header 19, binlog version 2, server version 50, create timestamp 4,
	// header length 1, then the post-header lengths, the algorithm and
	// the checksum.
	if len(raw) < replication.EventHeaderSize+2+50+4+1+1+replication.BinlogChecksumLength {
		return 0, false
	}
	return raw[len(raw)-replication.BinlogChecksumLength-1], true
}

// crcOK reports whether raw's last 4 bytes are the CRC32 of the rest.
func crcOK(raw []byte) bool {
	n := len(raw) - replication.BinlogChecksumLength
	return n >= 0 && crc32.ChecksumIEEE(raw[:n]) == binary.LittleEndian.Uint32(raw[n:])
}

// replicaID is the server id of a dump: mysql.server_id, else random in
// [2^31, 2^32) (never a real replica's, whose dump a server would end).
func (r *Reader) replicaID() uint32 {
	if r.serverID != 0 {
		return r.serverID
	}
	return 1<<31 + rand.Uint32N(1<<31)
}
