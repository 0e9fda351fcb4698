package mysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/opctl-dev/opctl/sources/config"
)

// This file gives every connection of a Reader or Writer the session time
// zone the consumers write DATETIMEs in (mysql.time_zone, default the
// server's @@global.time_zone; docs/config.md#mysql), whatever the DSN's
// time_zone or loc say, and reads DATETIMEs as times of that zone:
//
//   - mysql.time_zone set: the driver sends SET time_zone with the other
//     session variables of the DSN as it connects (one statement per new
//     connection, none per query), and DATETIMEs are read in that zone;
//   - unset: no SET (the session keeps the server's default) and the first
//     connection reads which zone that is, once per pool, in one statement
//     (@@session.time_zone, @@system_time_zone, NOW(6), UTC_TIMESTAMP(6));
//     connections that open meanwhile wait for that answer, not for each
//     other's handshakes.
//
// The driver reads DATETIMEs in its Config's Loc, which the pool shares; a
// connection gets its own copy of the Config through BeforeConnect, so the
// zone is set on that copy once it is known, before the connection is used.

// zoneQuery reads the session's zone and its current offset from UTC.
const zoneQuery = "SELECT @@session.time_zone, @@system_time_zone, NOW(6), UTC_TIMESTAMP(6)"

// errUnknownTimeZone is MySQL's "Unknown or incorrect time zone".
const errUnknownTimeZone = 1298

// zoneConnector opens connections through the driver's connector and sets
// the location of each one's DATETIMEs.
type zoneConnector struct {
	inner driver.Connector
	// set is the configured mysql.time_zone ("" when unset), for messages.
	set string

	mu  sync.Mutex
	loc *time.Location // the session zone; nil until known
	// reading is closed when the connection reading the zone is done; nil
	// when none is reading.
	reading chan struct{}
}

// connCfg carries, from BeforeConnect to Connect, the copy of the Config
// the new connection uses.
type connCfg struct{ cfg *gomysql.Config }

type connCfgKey struct{}

// newZoneConnector returns the connector of cfg. loc is the configured
// zone's location, or nil for the server's default; setting is
// mysql.time_zone as written.
func newZoneConnector(cfg *gomysql.Config, loc *time.Location, setting string) (*zoneConnector, error) {
	z := &zoneConnector{set: setting, loc: loc}
	if err := cfg.Apply(gomysql.BeforeConnect(func(ctx context.Context, c *gomysql.Config) error {
		if slot, ok := ctx.Value(connCfgKey{}).(*connCfg); ok {
			slot.cfg = c
		}
		return nil
	})); err != nil {
		return nil, err
	}
	inner, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	z.inner = inner
	return z, nil
}

// Driver implements driver.Connector.
func (z *zoneConnector) Driver() driver.Driver { return z.inner.Driver() }

// Connect implements driver.Connector: it connects, then sets the zone of
// the connection's DATETIMEs (reading it from the server first if no
// connection has yet).
func (z *zoneConnector) Connect(ctx context.Context) (driver.Conn, error) {
	slot := &connCfg{}
	conn, err := z.inner.Connect(context.WithValue(ctx, connCfgKey{}, slot))
	if err != nil {
		var me *gomysql.MySQLError
		switch {
		case errors.As(err, &me) && me.Number == errUnknownTimeZone:
			return nil, &zoneError{err: err, msg: fmt.Sprintf("the server refused mysql.time_zone %q (%s): load its time zone tables (mysql_tzinfo_to_sql) or set mysql.time_zone to an offset such as \"+08:00\"",
				z.set, me.Message)}
		case me != nil && !isConnError(err):
			// A statement of the connection's setup (the DSN's session
			// variables) was refused: no connection can be made, so it is
			// not a failed query of one step.
			return nil, &zoneError{err: err, msg: fmt.Sprintf("the server refused the session variables of the DSN (%s): fix or remove them", me)}
		}
		return nil, err
	}
	if slot.cfg == nil {
		conn.Close()
		return nil, errors.New("mysql: the driver connected without its configuration")
	}
	loc, err := z.zone(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	slot.cfg.Loc = loc
	return conn, nil
}

// zone returns the session zone's location: the configured one, the one an
// earlier connection read, or the one conn reads now. While another
// connection reads it, it waits for that answer; if that read fails, conn
// reads it itself.
func (z *zoneConnector) zone(ctx context.Context, conn driver.Conn) (*time.Location, error) {
	for {
		z.mu.Lock()
		if z.loc != nil {
			loc := z.loc
			z.mu.Unlock()
			return loc, nil
		}
		if z.reading == nil {
			done := make(chan struct{})
			z.reading = done
			z.mu.Unlock()
			loc, err := readZone(ctx, conn)
			z.mu.Lock()
			z.loc, z.reading = loc, nil
			z.mu.Unlock()
			close(done)
			return loc, err
		}
		wait := z.reading
		z.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// readZone asks the server which zone the session is in (zoneQuery).
func readZone(ctx context.Context, conn driver.Conn) (*time.Location, error) {
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return nil, errors.New("mysql: the driver's connection cannot run a query")
	}
	rows, err := q.QueryContext(ctx, zoneQuery, nil)
	if err != nil {
		return nil, zoneReadError(err)
	}
	defer rows.Close()
	vals := make([]driver.Value, 4)
	if err := rows.Next(vals); err != nil {
		if err == io.EOF {
			err = errors.New("no row")
		}
		return nil, zoneReadError(err)
	}
	tz, system := text(vals[0]), text(vals[1])
	now, ok1 := vals[2].(time.Time)
	utc, ok2 := vals[3].(time.Time)
	if !ok1 || !ok2 {
		return nil, zoneReadError(fmt.Errorf("NOW(6) and UTC_TIMESTAMP(6) returned %T and %T", vals[2], vals[3]))
	}
	// Both were read as UTC wall clocks: their difference is the offset.
	offset := int(now.Sub(utc).Round(time.Minute) / time.Second)
	return zoneLocation(tz, system, offset, utc), nil
}

// zoneLocation is the location of the server's answer: the zone it names
// (SYSTEM: its system zone) when this machine knows that name and it has
// the server's offset now (so DATETIMEs from before a daylight saving
// change are read right too), else the fixed offset.
func zoneLocation(tz, system string, offset int, now time.Time) *time.Location {
	name := tz
	if strings.EqualFold(name, "SYSTEM") {
		name = system
	}
	if z, problem := config.ParseTimeZone(name); problem == "" && z.Loc != nil {
		if _, o := now.In(z.Loc).Zone(); o == offset {
			return z.Loc
		}
	}
	sign, abs := '+', offset
	if offset < 0 {
		sign, abs = '-', -offset
	}
	return time.FixedZone(fmt.Sprintf("%c%02d:%02d", sign, abs/3600, abs%3600/60), offset)
}

func text(v driver.Value) string {
	switch s := v.(type) {
	case []byte:
		return string(s)
	case string:
		return s
	}
	return ""
}

// zoneError is a failure to set up a session (its time zone, the DSN's
// session variables) or to read its time zone: the pool is unusable
// (isConnError), and the message says what to do.
type zoneError struct {
	msg string
	err error
}

func (e *zoneError) Error() string { return e.msg }

func (e *zoneError) Unwrap() error { return e.err }

func zoneReadError(err error) error {
	var me *gomysql.MySQLError
	if !errors.As(err, &me) {
		return err // the connection failed: reported as such
	}
	return &zoneError{err: err, msg: fmt.Sprintf("cannot read the server's time zone (%s): %v; set mysql.time_zone to the zone the consumers write DATETIMEs in, e.g. \"+00:00\"",
		zoneQuery, me)}
}
