// Package binlog is the only code that reads a server's binlog (a
// COM_BINLOG_DUMP as a replica, decoded by go-mysql-org/go-mysql's parser):
// the row changes of one table in one operation's window, with their
// transaction, for a step with a `binlog` block (docs/config.md#binlog),
// and every other event of the window accounted for
// (docs/where.md#binlog-evidence). It reads facts; which change counts for
// which operation is decided by sources.AssignChanges, the verdict by
// inspect.
package binlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	drv "github.com/go-sql-driver/mysql"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Reader reads row changes from the binlog of one server. It opens its
// connections per read and keeps none: a triage reads one window.
type Reader struct {
	addr, user, password, db string
	serverID                 uint32
	// Timeout bounds a whole read (Changes, Oldest): every connection of
	// it, the handshakes, the queries and the dump.
	Timeout time.Duration
}

// New returns a Reader for a go-sql-driver/mysql DSN (mysql.binlog_dsn, else
// mysql.dsn) and a replica server id (0: random in [2^31, 2^32) per
// connection). The DSN must use tcp; errors never hold the password.
func New(dsn string, serverID uint32, timeout time.Duration) (*Reader, error) {
	c, err := drv.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql.binlog_dsn %q: %v", config.RedactDSN(dsn), err)
	}
	if c.Net != "tcp" {
		return nil, fmt.Errorf("mysql.binlog_dsn %q: the binlog is read over tcp(host:port), not %s", config.RedactDSN(dsn), c.Net)
	}
	if timeout <= 0 {
		timeout = sources.DefaultTimeout
	}
	return &Reader{addr: c.Addr, user: c.User, password: c.Passwd, db: c.DBName, serverID: serverID, Timeout: timeout}, nil
}

// Database is the DSN's database: the schema of a binlog table written
// without one.
func (r *Reader) Database() string { return r.db }

// UnavailableError is a window the binlog cannot answer for: log_bin off, a
// format other than ROW, a minimal row image, or a window older than the
// oldest binlog the server keeps.
type UnavailableError struct {
	Addr   string
	Reason string
}

// Error names the server and why, with what to do.
func (e *UnavailableError) Error() string {
	return fmt.Sprintf("binlog of %s: %s", e.Addr, e.Reason)
}

// file is one binlog file of SHOW BINARY LOGS.
type file struct {
	name string
}

// Changes implements sources.Binlog: it checks the server's binlog settings,
// finds the file holding req.From by the files' first event timestamps (a
// binary search, reading one event per file probed), then reads from there
// to the first transaction after req.To (or the binlog's end), decoding
// only the row events of req's tables and verifying every event's
// checksum. Every connection is bound to ctx and to the reader's timeout.
// A window the read cannot account for whole is an *UnavailableError.
func (r *Reader) Changes(ctx context.Context, req sources.BinlogRequest) (sources.BinlogRead, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	srv, err := r.inspect(ctx, req)
	if err != nil {
		return sources.BinlogRead{}, err
	}
	from := req.From.Unix()
	start, err := r.startFile(ctx, srv, from)
	var later *laterStart
	if errors.As(err, &later) && req.Clamp {
		req.From, start, err = time.Unix(later.first, 0), 0, nil
	}
	if err != nil {
		return sources.BinlogRead{}, err
	}
	read, err := r.scan(ctx, srv, start, req)
	read.From = req.From
	return read, err
}

// laterStart is the UnavailableError of a window that starts before the
// oldest binlog the server keeps, with that binlog's start.
type laterStart struct {
	*UnavailableError
	first int64
}

// Unwrap makes a laterStart an *UnavailableError to errors.As.
func (l *laterStart) Unwrap() error { return l.UnavailableError }

// server is what one read learned about the server before streaming.
type server struct {
	flavor string
	files  []file
	// crc: binlog_checksum is CRC32.
	crc bool
	// fold: lower_case_table_names is 1 or 2 (names compare
	// case-insensitively); 0 compares them byte for byte.
	fold bool
	// keyPos, deltaPos and txPos are the key, delta and transaction
	// columns' positions in the row images (information_schema's ordinal
	// positions: MariaDB's table maps carry no column names by default);
	// cols and txCols the tables' column counts.
	keyPos, deltaPos, txPos int
	cols, txCols            int
}

// inspect reads the binlog settings, the binlog files and the tables'
// column positions on one SQL connection.
func (r *Reader) inspect(ctx context.Context, req sources.BinlogRequest) (*server, error) {
	conn, err := r.connect(ctx, "SQL connection")
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	res, err := r.query(ctx, conn, "read the binlog settings",
		"SELECT @@log_bin, @@binlog_format, @@binlog_row_image, VERSION(), @@binlog_checksum, @@lower_case_table_names")
	if err != nil {
		return nil, err
	}
	logBin, _ := res.GetInt(0, 0)
	format, _ := res.GetString(0, 1)
	image, _ := res.GetString(0, 2)
	version, _ := res.GetString(0, 3)
	checksum, _ := res.GetString(0, 4)
	lctn, _ := res.GetInt(0, 5)
	switch {
	case logBin == 0:
		return nil, &UnavailableError{Addr: r.addr, Reason: "log_bin is OFF: the server keeps no binlog (start it with --log-bin and --binlog-format=ROW)"}
	case !strings.EqualFold(format, "ROW"):
		return nil, &UnavailableError{Addr: r.addr, Reason: fmt.Sprintf("binlog_format is %s: row changes need binlog_format=ROW", format)}
	case strings.EqualFold(image, "MINIMAL"):
		return nil, &UnavailableError{Addr: r.addr, Reason: "binlog_row_image is MINIMAL: the before image has no " + req.DeltaColumn + " (set binlog_row_image=FULL)"}
	}
	srv := &server{flavor: flavorOf(version), txPos: -1, crc: strings.EqualFold(checksum, "CRC32"), fold: lctn != 0}
	if srv.files, err = r.binaryLogs(ctx, conn); err != nil {
		return nil, err
	}
	cols, err := r.columns(ctx, conn, srv, req.Schema, req.Table)
	if err != nil {
		return nil, err
	}
	srv.cols = len(cols)
	if srv.keyPos, err = position(cols, req.Schema, req.Table, req.KeyColumn); err != nil {
		return nil, err
	}
	if srv.deltaPos, err = position(cols, req.Schema, req.Table, req.DeltaColumn); err != nil {
		return nil, err
	}
	if req.TxTable != "" {
		tcols, err := r.columns(ctx, conn, srv, req.TxSchema, req.TxTable)
		if err != nil {
			return nil, err
		}
		srv.txCols = len(tcols)
		if srv.txPos, err = position(tcols, req.TxSchema, req.TxTable, req.TxColumn); err != nil {
			return nil, err
		}
	}
	return srv, nil
}

// columns lists a table's columns in row-image order (values bound). The
// schema and table names are compared as the server compares them: with
// lower_case_table_names=0, byte for byte (information_schema's own
// comparison may ignore case).
func (r *Reader) columns(ctx context.Context, conn *client.Conn, srv *server, schema, table string) ([]string, error) {
	res, err := r.query(ctx, conn, "read the columns of "+schema+"."+table,
		"SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION", schema, table)
	if err != nil {
		return nil, err
	}
	var out []string
	for i := 0; i < res.RowNumber(); i++ {
		s, _ := res.GetString(i, 0)
		t, _ := res.GetString(i, 1)
		if !srv.fold && (s != schema || t != table) {
			continue
		}
		c, _ := res.GetString(i, 2)
		out = append(out, c)
	}
	return out, nil
}

func position(cols []string, schema, table, col string) (int, error) {
	if len(cols) == 0 {
		return -1, fmt.Errorf("binlog: table %s.%s does not exist (check binlog.table and the DSN's database; with lower_case_table_names=0 the server compares names case-sensitively)", schema, table)
	}
	for i, c := range cols {
		if strings.EqualFold(c, col) {
			return i, nil
		}
	}
	return -1, fmt.Errorf("binlog: table %s.%s has no column %s (it has %s)", schema, table, col, strings.Join(cols, ", "))
}

// scrub removes the password from an error's text (a driver that quotes its
// configuration).
func scrub(err error, password string) error {
	if password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), password, "***"))
}

// startFile is the last file that starts before from (or the first file,
// when it starts at from): a binary search over the files' start times,
// each read from the file's first event. Timestamps are seconds, so an
// event of second from may sit at the end of the file before one that
// starts at from. A first file that starts after from means the window is
// no longer (or never was) in the binlog: purged, or logged before a RESET
// MASTER.
func (r *Reader) startFile(ctx context.Context, srv *server, from int64) (int, error) {
	first, err := r.fileStart(ctx, srv, 0)
	if err != nil {
		return 0, err
	}
	if first > from {
		return 0, &laterStart{first: first, UnavailableError: &UnavailableError{Addr: r.addr, Reason: fmt.Sprintf("the window starts at %s, but the oldest binlog the server keeps (%s) starts at %s: the changes of the window were purged, or were never logged there (RESET MASTER, log_bin off)",
			stamp(from), srv.files[0].name, stamp(first))}}
	}
	lo, hi := 0, len(srv.files)-1 // invariant: lo == 0 or start(lo) < from
	for lo < hi {
		mid := (lo + hi + 1) / 2
		t, err := r.fileStart(ctx, srv, mid)
		if err != nil {
			return 0, err
		}
		if t < from {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, nil
}

// flavorOf is go-mysql's flavor of a server by its VERSION().
func flavorOf(version string) string {
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return gomysql.MariaDBFlavor
	}
	return gomysql.MySQLFlavor
}

// binaryLogs is SHOW BINARY LOGS, oldest first.
func (r *Reader) binaryLogs(ctx context.Context, conn *client.Conn) ([]file, error) {
	res, err := r.query(ctx, conn, "SHOW BINARY LOGS (the binlog user needs REPLICATION CLIENT)", "SHOW BINARY LOGS")
	if err != nil {
		return nil, err
	}
	var files []file
	for i := 0; i < res.RowNumber(); i++ {
		name, _ := res.GetString(i, 0)
		files = append(files, file{name: name})
	}
	if len(files) == 0 {
		return nil, &UnavailableError{Addr: r.addr, Reason: "SHOW BINARY LOGS lists no file"}
	}
	return files, nil
}

// Oldest returns the time of the oldest retained binlog's first event: how
// far back the binlog reaches (doctor's binlog check, docs/doctor.md). It
// reads that file's first events only, within the reader's timeout.
func (r *Reader) Oldest(ctx context.Context) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	conn, err := r.connect(ctx, "SQL connection")
	if err != nil {
		return time.Time{}, err
	}
	res, err := r.query(ctx, conn, "read the server version", "SELECT VERSION()")
	if err != nil {
		conn.Close()
		return time.Time{}, err
	}
	version, _ := res.GetString(0, 0)
	files, err := r.binaryLogs(ctx, conn)
	conn.Close()
	if err != nil {
		return time.Time{}, err
	}
	start, err := r.fileStart(ctx, &server{flavor: flavorOf(version), files: files, txPos: -1}, 0)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(start, 0), nil
}

// fileStart reads the timestamp of file i's format description event: the
// time the server opened the file.
func (r *Reader) fileStart(ctx context.Context, srv *server, i int) (int64, error) {
	st, err := r.open(ctx, srv, srv.files[i].name, nil)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	for {
		ev, err := st.next()
		if err == io.EOF {
			return 0, &UnavailableError{Addr: r.addr, Reason: srv.files[i].name + " holds no event"}
		}
		if err != nil {
			return 0, err
		}
		if _, ok := ev.Event.(*replication.FormatDescriptionEvent); ok {
			return int64(ev.Header.Timestamp), nil
		}
	}
}

// scan reads from file start to the window's end and collects the changes.
func (r *Reader) scan(ctx context.Context, srv *server, start int, req sources.BinlogRequest) (sources.BinlogRead, error) {
	w := newWindow(req, srv.keyPos, srv.deltaPos, srv.txPos)
	w.cols, w.txCols, w.fold, w.crc = srv.cols, srv.txCols, srv.fold, srv.crc
	name := srv.files[start].name
	st, err := r.open(ctx, srv, name, w.decode)
	if err != nil {
		return sources.BinlogRead{}, err
	}
	defer st.Close()
	w.evType = &st.typ
	out := sources.BinlogRead{Files: []string{name}}
	for {
		file := st.file
		ev, err := st.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return out, err
		}
		if st.file != file && st.file != out.Files[len(out.Files)-1] {
			out.Files = append(out.Files, st.file)
		}
		if rot, ok := ev.Event.(*replication.RotateEvent); ok && string(rot.NextLogName) == file {
			continue // the server's rotate to the file it starts with
		}
		out.Bytes += int64(ev.Header.EventSize)
		if w.event(ev, file, st.start(ev)) {
			break
		}
	}
	if w.problem != "" {
		return out, &UnavailableError{Addr: r.addr, Reason: w.problem}
	}
	out.Changes = w.changes
	return out, nil
}
