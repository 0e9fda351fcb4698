// Package binlog is the only code that reads a server's binlog
// (github.com/go-mysql-org/go-mysql's replication, as a replica does): the
// row changes of one table in one operation's window, with their
// transaction, for a step with a `binlog` block (docs/config.md#binlog). It
// reads facts; which change counts for which operation is decided by
// sources.AttributeChanges, the verdict by inspect.
package binlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
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
	// Timeout bounds connecting and each read.
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
	size int64
}

// Changes implements sources.Binlog: it checks the server's binlog settings,
// finds the file holding req.From by the files' first event timestamps (a
// binary search, reading one event per file probed), then reads from there
// to the end of req.To (or the binlog's end when SHOW BINARY LOGS was read),
// decoding only the row events of req's tables.
func (r *Reader) Changes(ctx context.Context, req sources.BinlogRequest) (sources.BinlogRead, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	srv, err := r.inspect(ctx, req)
	if err != nil {
		return sources.BinlogRead{}, err
	}
	from := req.From.Unix()
	start, err := r.startFile(ctx, srv, from)
	if err != nil {
		return sources.BinlogRead{}, err
	}
	return r.scan(ctx, srv, start, req)
}

// server is what one read learned about the server before streaming.
type server struct {
	flavor string
	files  []file
	// keyPos, deltaPos and txPos are the key, delta and transaction
	// columns' positions in the row images (information_schema's ordinal
	// positions: MariaDB's table maps carry no column names by default).
	keyPos, deltaPos, txPos int
}

// inspect reads the binlog settings, the binlog files and the tables'
// column positions on one SQL connection.
func (r *Reader) inspect(ctx context.Context, req sources.BinlogRequest) (*server, error) {
	conn, err := r.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	res, err := conn.Execute("SELECT @@log_bin, @@binlog_format, @@binlog_row_image, VERSION()")
	if err != nil {
		return nil, r.sqlErr("read the binlog settings", err)
	}
	logBin, _ := res.GetInt(0, 0)
	format, _ := res.GetString(0, 1)
	image, _ := res.GetString(0, 2)
	version, _ := res.GetString(0, 3)
	switch {
	case logBin == 0:
		return nil, &UnavailableError{Addr: r.addr, Reason: "log_bin is OFF: the server keeps no binlog (start it with --log-bin and --binlog-format=ROW)"}
	case !strings.EqualFold(format, "ROW"):
		return nil, &UnavailableError{Addr: r.addr, Reason: fmt.Sprintf("binlog_format is %s: row changes need binlog_format=ROW", format)}
	case strings.EqualFold(image, "MINIMAL"):
		return nil, &UnavailableError{Addr: r.addr, Reason: "binlog_row_image is MINIMAL: the before image has no " + req.DeltaColumn + " (set binlog_row_image=FULL)"}
	}
	srv := &server{flavor: flavorOf(version), txPos: -1}
	if srv.files, err = r.binaryLogs(conn); err != nil {
		return nil, err
	}
	cols, err := columns(conn, req.Schema, req.Table)
	if err != nil {
		return nil, r.sqlErr("read the columns of "+req.Schema+"."+req.Table, err)
	}
	if srv.keyPos, err = position(cols, req.Schema, req.Table, req.KeyColumn); err != nil {
		return nil, err
	}
	if srv.deltaPos, err = position(cols, req.Schema, req.Table, req.DeltaColumn); err != nil {
		return nil, err
	}
	if req.TxTable != "" {
		tcols, err := columns(conn, req.TxSchema, req.TxTable)
		if err != nil {
			return nil, r.sqlErr("read the columns of "+req.TxSchema+"."+req.TxTable, err)
		}
		if srv.txPos, err = position(tcols, req.TxSchema, req.TxTable, req.TxColumn); err != nil {
			return nil, err
		}
	}
	return srv, nil
}

// columns lists a table's columns in row-image order (values bound).
func columns(conn *client.Conn, schema, table string) ([]string, error) {
	res, err := conn.Execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION", schema, table)
	if err != nil {
		return nil, err
	}
	var out []string
	for i := 0; i < res.RowNumber(); i++ {
		c, _ := res.GetString(i, 0)
		out = append(out, c)
	}
	return out, nil
}

func position(cols []string, schema, table, col string) (int, error) {
	if len(cols) == 0 {
		return -1, fmt.Errorf("binlog: table %s.%s does not exist (check binlog.table and the DSN's database)", schema, table)
	}
	for i, c := range cols {
		if strings.EqualFold(c, col) {
			return i, nil
		}
	}
	return -1, fmt.Errorf("binlog: table %s.%s has no column %s (it has %s)", schema, table, col, strings.Join(cols, ", "))
}

func (r *Reader) sqlErr(what string, err error) error {
	return fmt.Errorf("binlog of %s: %s: %v", r.addr, what, err)
}

func (r *Reader) connect(ctx context.Context) (*client.Conn, error) {
	c, err := client.ConnectWithContext(ctx, r.addr, r.user, r.password, "", r.Timeout)
	if err != nil {
		return nil, fmt.Errorf("binlog of %s: connect as %s: %v", r.addr, r.user, scrub(err, r.password))
	}
	return c, nil
}

// scrub removes the password from an error's text (a driver that quotes its
// configuration).
func scrub(err error, password string) error {
	if password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), password, "***"))
}

// startFile is the last file whose first event is at or before from: a
// binary search over the files' start times, each read from the file's
// first event. A first file that starts after from means the window is no
// longer in the binlog.
func (r *Reader) startFile(ctx context.Context, srv *server, from int64) (int, error) {
	first, fresh, err := r.fileStart(ctx, srv, 0)
	if err != nil {
		return 0, err
	}
	if first > from && !fresh {
		return 0, &UnavailableError{Addr: r.addr, Reason: fmt.Sprintf("the window starts at %s, but the oldest binlog the server keeps (%s) starts at %s: the changes of the window were purged",
			time.Unix(from, 0).UTC().Format(time.RFC3339), srv.files[0].name, time.Unix(first, 0).UTC().Format(time.RFC3339))}
	}
	lo, hi := 0, len(srv.files)-1 // invariant: start(lo) <= from
	for lo < hi {
		mid := (lo + hi + 1) / 2
		t, _, err := r.fileStart(ctx, srv, mid)
		if err != nil {
			return 0, err
		}
		if t <= from {
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
func (r *Reader) binaryLogs(conn *client.Conn) ([]file, error) {
	res, err := conn.Execute("SHOW BINARY LOGS")
	if err != nil {
		return nil, r.sqlErr("SHOW BINARY LOGS (the binlog user needs REPLICATION CLIENT)", err)
	}
	var files []file
	for i := 0; i < res.RowNumber(); i++ {
		name, _ := res.GetString(i, 0)
		size, _ := res.GetInt(i, 1)
		files = append(files, file{name: name, size: size})
	}
	if len(files) == 0 {
		return nil, &UnavailableError{Addr: r.addr, Reason: "SHOW BINARY LOGS lists no file"}
	}
	return files, nil
}

// Oldest returns the time of the oldest retained binlog's first event: how
// far back the binlog reaches (doctor's binlog check, docs/doctor.md). It
// reads that file's first events only.
func (r *Reader) Oldest(ctx context.Context) (time.Time, error) {
	conn, err := r.connect(ctx)
	if err != nil {
		return time.Time{}, err
	}
	res, err := conn.Execute("SELECT VERSION()")
	if err != nil {
		conn.Close()
		return time.Time{}, r.sqlErr("read the server version", err)
	}
	version, _ := res.GetString(0, 0)
	files, err := r.binaryLogs(conn)
	conn.Close()
	if err != nil {
		return time.Time{}, err
	}
	start, _, err := r.fileStart(ctx, &server{flavor: flavorOf(version), files: files, txPos: -1}, 0)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(start, 0), nil
}

// fileStart reads the timestamp of file i's format description event: the
// time the server opened the file. fresh is true when the file's GTID list
// (MariaDB) or previous GTIDs (MySQL) event that follows it is empty: no
// transaction was ever logged before the file, so nothing before it was
// purged (a new server's first binlog).
func (r *Reader) fileStart(ctx context.Context, srv *server, i int) (start int64, fresh bool, err error) {
	s := r.syncer(srv, nil)
	defer s.Close()
	st, err := s.StartSync(gomysql.Position{Name: srv.files[i].name, Pos: 4})
	if err != nil {
		return 0, false, r.streamErr(srv.files[i].name, err)
	}
	seen := false
	for {
		ev, err := st.GetEvent(ctx)
		if err != nil {
			return 0, false, r.streamErr(srv.files[i].name, err)
		}
		switch e := ev.Event.(type) {
		case *replication.FormatDescriptionEvent:
			start, seen = int64(ev.Header.Timestamp), true
			if i > 0 {
				return start, false, nil
			}
		case *replication.MariadbGTIDListEvent:
			return start, seen && len(e.GTIDs) == 0, nil
		case *replication.PreviousGTIDsEvent:
			return start, seen && e.GTIDSets == "", nil
		default:
			if seen && ev.Header.EventType != replication.ROTATE_EVENT {
				return start, false, nil
			}
		}
	}
}

func (r *Reader) streamErr(name string, err error) error {
	msg := scrub(err, r.password).Error()
	hint := ""
	if l := strings.ToLower(msg); strings.Contains(l, "denied") || strings.Contains(msg, "1227") {
		hint = " (the binlog user needs REPLICATION SLAVE)"
	}
	return fmt.Errorf("binlog of %s: read %s%s: %s", r.addr, name, hint, msg)
}

// syncer makes a replica connection's syncer; decode, when set, decodes
// rows events (the scan decodes only those of its tables).
func (r *Reader) syncer(srv *server, decode func(*replication.RowsEvent, []byte) error) *replication.BinlogSyncer {
	host, port, _ := net.SplitHostPort(r.addr)
	p, _ := strconv.Atoi(port)
	id := r.serverID
	if id == 0 {
		id = 1<<31 + rand.Uint32N(1<<31)
	}
	return replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID: id, Flavor: srv.flavor, Host: host, Port: uint16(p), User: r.user, Password: r.password,
		// DECIMAL as the server's exact text, never a float (UseDecimal
		// would make a shopspring value; false keeps the string).
		UseDecimal: false, ParseTime: false,
		Logger:               slog.New(slog.NewTextHandler(io.Discard, nil)),
		DisableRetrySync:     true,
		MaxReconnectAttempts: 1,
		ReadTimeout:          r.Timeout,
		HeartbeatPeriod:      time.Second,
		RowsEventDecodeFunc:  decode,
		// A small read-ahead: a probe of a file reads one event and stops,
		// and other tables' 1 MB events are not queued by the hundred.
		EventCacheCount: 8,
	})
}

// scan reads from file start to the window's end and collects the changes.
func (r *Reader) scan(ctx context.Context, srv *server, start int, req sources.BinlogRequest) (sources.BinlogRead, error) {
	w := newWindow(req, srv.keyPos, srv.deltaPos, srv.txPos)
	s := r.syncer(srv, w.decode)
	defer s.Close()
	name := srv.files[start].name
	st, err := s.StartSync(gomysql.Position{Name: name, Pos: 4})
	if err != nil {
		return sources.BinlogRead{}, r.streamErr(name, err)
	}
	last := srv.files[len(srv.files)-1]
	out := sources.BinlogRead{Files: []string{name}}
	cur := name
	for {
		ev, err := st.GetEvent(ctx)
		if err != nil {
			return out, r.streamErr(cur, err)
		}
		h := ev.Header
		if rot, ok := ev.Event.(*replication.RotateEvent); ok {
			if next := string(rot.NextLogName); next != cur {
				cur = next
				out.Files = append(out.Files, next)
			}
			continue
		}
		if h.EventType == replication.HEARTBEAT_EVENT || h.EventType == replication.HEARTBEAT_LOG_EVENT_V2 {
			if cur == last.name {
				out.Changes = w.changes
				return out, nil // the server has nothing more: the binlog's end
			}
			continue
		}
		out.Bytes += int64(h.EventSize)
		if done := w.event(ev, cur); done {
			out.Changes = w.changes
			return out, nil
		}
		if cur == last.name && int64(h.LogPos) >= last.size && w.idle() {
			out.Changes = w.changes
			return out, nil
		}
	}
}
