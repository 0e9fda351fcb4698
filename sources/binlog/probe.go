package binlog

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/opctl-dev/opctl/sources"
)

// errProbed ends a probe's follow at its first progress mark.
var errProbed = errors.New("probed")

// Addr is the server's host:port.
func (r *Reader) Addr() string { return r.addr }

// Probe says whether `opctl watch` can follow this server's binlog
// (docs/watch.md#binlog-mode), within the reader's timeout: log_bin ON,
// binlog_format ROW and binlog_row_image not MINIMAL (an
// *UnavailableError saying which is not), the head
// position (SHOW MASTER STATUS: REPLICATION CLIENT), and a dump from it
// that delivers its first progress mark (REPLICATION SLAVE; about a
// second). It returns the head.
func (r *Reader) Probe(ctx context.Context) (sources.BinlogPosition, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	conn, err := r.connect(ctx, "SQL connection")
	if err != nil {
		return sources.BinlogPosition{}, err
	}
	res, err := r.query(ctx, conn, "read the binlog settings", "SELECT @@log_bin, @@global.binlog_format, @@global.binlog_row_image")
	conn.Close()
	if err != nil {
		return sources.BinlogPosition{}, err
	}
	logBin, _ := res.GetInt(0, 0)
	format, _ := res.GetString(0, 1)
	image, _ := res.GetString(0, 2)
	switch {
	case logBin == 0:
		return sources.BinlogPosition{}, &UnavailableError{Addr: r.addr, Reason: "log_bin is OFF: the server keeps no binlog (start it with --log-bin and --binlog-format=ROW)"}
	case !strings.EqualFold(format, "ROW"):
		return sources.BinlogPosition{}, &UnavailableError{Addr: r.addr, Reason: fmt.Sprintf("binlog_format is %s: row changes need binlog_format=ROW", format)}
	case strings.EqualFold(image, "MINIMAL"):
		return sources.BinlogPosition{}, &UnavailableError{Addr: r.addr, Reason: "binlog_row_image is MINIMAL: an update's row image lacks the key columns the watch maps changes by (set binlog_row_image=FULL)"}
	}
	head, err := r.Head(ctx)
	if err != nil {
		return head, err
	}
	err = r.Follow(ctx, head, nil, func(sources.BinlogTx) error { return errProbed })
	if errors.Is(err, errProbed) {
		return head, nil
	}
	if err == nil {
		err = errors.New("the dump ended at once")
	}
	return head, err
}
