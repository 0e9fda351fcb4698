package mysql

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/opctl-dev/opctl/lab/testenv"
)

// TestZoneLocation: the server's answer about its zone becomes the
// location DATETIMEs are read in: the named zone when this machine knows it
// with the server's offset now, else that offset.
func TestZoneLocation(t *testing.T) {
	summer := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	winter := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name, tz, system string
		offset           int
		wantName         string
		wantWinter       int // the location's offset in winter: a named zone keeps its rules
	}{
		{"system UTC", "SYSTEM", "UTC", 0, "UTC", 0},
		{"offset session", "+08:00", "UTC", 8 * 3600, "+08:00", 8 * 3600},
		{"negative offset", "-03:30", "UTC", -(3*3600 + 1800), "-03:30", -(3*3600 + 1800)},
		{"named zone", "Europe/Berlin", "UTC", 2 * 3600, "Europe/Berlin", 3600},
		{"system named zone", "SYSTEM", "Europe/Berlin", 2 * 3600, "Europe/Berlin", 3600},
		{"ambiguous abbreviation", "SYSTEM", "CST", 8 * 3600, "+08:00", 8 * 3600},
		{"abbreviation this machine does not know", "SYSTEM", "CEST", 2 * 3600, "+02:00", 2 * 3600},
		{"never the operator's zone", "SYSTEM", "Local", 0, "+00:00", 0},
		{"a name whose offset is not the server's", "Asia/Shanghai", "UTC", 0, "+00:00", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			loc := zoneLocation(c.tz, c.system, c.offset, summer)
			if _, off := summer.In(loc).Zone(); off != c.offset || loc.String() != c.wantName {
				t.Errorf("zoneLocation(%q, %q, %d) = %v with offset %d; want %s with %d", c.tz, c.system, c.offset, loc, off, c.wantName, c.offset)
			}
			if _, off := winter.In(loc).Zone(); off != c.wantWinter {
				t.Errorf("zoneLocation(%q, %q, %d): winter offset %d, want %d", c.tz, c.system, c.offset, off, c.wantWinter)
			}
		})
	}
}

// withParams returns dsn with its parameters changed: loc (nil keeps it)
// and the session variables of vars (a value "" removes it).
func withParams(t testing.TB, dsn string, loc *time.Location, vars map[string]string) string {
	t.Helper()
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if loc != nil {
		cfg.Loc = loc
	}
	for k, v := range vars {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		if v == "" {
			delete(cfg.Params, k)
		} else {
			cfg.Params[k] = v
		}
	}
	return cfg.FormatDSN()
}

// dsnVariants are the DSNs whose time_zone or loc moved the clock opctl
// compared leases with, or the instants its DATETIMEs stood for.
func dsnVariants(t testing.TB, dsn string) map[string]string {
	t.Helper()
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"as is":                   dsn,
		"time_zone='+08:00'":      withParams(t, dsn, nil, map[string]string{"time_zone": "'+08:00'"}),
		"time_zone='-08:00'":      withParams(t, dsn, nil, map[string]string{"time_zone": "'-08:00'"}),
		"loc=Asia/Shanghai":       withParams(t, dsn, shanghai, nil),
		"loc=Local":               withParams(t, dsn, time.Local, nil),
		"loc and time_zone +8/-8": withParams(t, withParams(t, dsn, shanghai, nil), nil, map[string]string{"time_zone": "'-08:00'"}),
	}
}

// zoneFixture is a table of one row written by a consumer whose session is
// in zone ("" the server's default): a lease live for an hour and a
// created_at of now, both DATETIME, and the instant it was written (from
// UTC_TIMESTAMP, which no session setting moves).
func zoneFixture(t *testing.T, db *testenv.DB, zone string) time.Time {
	t.Helper()
	db.Exec(t, "CREATE TABLE leases (id INT PRIMARY KEY, lease_until DATETIME(6) NOT NULL, created_at DATETIME(6) NOT NULL)")
	ctx := context.Background()
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if zone != "" {
		if _, err := conn.ExecContext(ctx, "SET time_zone = '"+zone+"'"); err != nil {
			t.Fatal(err)
		}
		defer conn.ExecContext(ctx, "SET time_zone = DEFAULT") // back to the pool as it came
	}
	if _, err := conn.ExecContext(ctx, "INSERT INTO leases VALUES (1, NOW(6) + INTERVAL 1 HOUR, NOW(6))"); err != nil {
		t.Fatal(err)
	}
	var utc string
	if err := conn.QueryRowContext(ctx, "SELECT CAST(UTC_TIMESTAMP(6) AS CHAR)").Scan(&utc); err != nil {
		t.Fatal(err)
	}
	at, err := time.ParseInLocation("2006-01-02 15:04:05.999999", utc, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// readLease reads the row and NOW(6) through db, concurrently on n
// connections of a fresh pool (the first of which reads the zone while the
// others wait for it).
func readLease(t *testing.T, db *sql.DB, n int) (lease, created, now time.Time) {
	t.Helper()
	type got struct{ lease, created, now time.Time }
	out := make([]got, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A transaction holds one connection each.
			tx, err := db.BeginTx(context.Background(), nil)
			if err != nil {
				errs[i] = err
				return
			}
			defer tx.Rollback()
			errs[i] = tx.QueryRow("SELECT lease_until, created_at, NOW(6) FROM leases WHERE id = 1").Scan(&out[i].lease, &out[i].created, &out[i].now)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if out[i].now.Location().String() != out[0].now.Location().String() {
			t.Errorf("connection %d reads in %v, connection 0 in %v", i, out[i].now.Location(), out[0].now.Location())
		}
		if !out[i].lease.Equal(out[0].lease) || !out[i].created.Equal(out[0].created) {
			t.Errorf("connection %d reads %v/%v, connection 0 %v/%v", i, out[i].lease, out[i].created, out[0].lease, out[0].created)
		}
	}
	return out[0].lease, out[0].created, out[0].now
}

// TestSessionTimeZone: whatever the DSN's time_zone or loc say, NOW(6) and
// the consumers' DATETIMEs are compared in the consumers' session zone
// (mysql.time_zone, default the server's), and read as the instants they
// were written at; on the read path and the write path alike.
func TestSessionTimeZone(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		consumer string // the consumers' session zone ("" the server's)
		setting  string // mysql.time_zone
	}{
		{"server default", "", ""},
		{"consumers in +08:00, configured", "+08:00", "+08:00"},
		{"consumers in -05:30, configured", "-05:30", "-05:30"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := testenv.MySQL(t)
			written := zoneFixture(t, db, c.consumer)
			for name, dsn := range dsnVariants(t, db.DSN) {
				for _, path := range []string{"reader", "writer"} {
					t.Run(name+"/"+path, func(t *testing.T) {
						var pool *sql.DB
						if path == "reader" {
							r, err := OpenWith(dsn, Options{Timeout: 5 * time.Second, TimeZone: c.setting})
							if err != nil {
								t.Fatal(err)
							}
							defer r.Close()
							pool = r.DB()
						} else {
							w, err := OpenWriterWith(dsn, Options{Timeout: 5 * time.Second, TimeZone: c.setting})
							if err != nil {
								t.Fatal(err)
							}
							defer w.Close()
							pool = w.r.DB()
						}
						lease, created, now := readLease(t, pool, 8)
						// The lease is live for about an hour by the database clock.
						if d := lease.Sub(now); d < 50*time.Minute || d > time.Hour {
							t.Errorf("lease_until %v - NOW(6) %v = %v, want about 1h", lease, now, d)
						}
						// And the DATETIMEs stand for the instants they were written at.
						near(t, "created_at", created, written, 5*time.Second)
						near(t, "NOW(6)", now, written, 30*time.Second)
					})
				}
			}
		})
	}
}

// TestSessionTimeZoneFromServer: with mysql.time_zone unset the zone is the
// session's as the server reports it (here forced to +05:30 on the
// connections, as a server whose global zone is +05:30 would be).
func TestSessionTimeZoneFromServer(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	written := zoneFixture(t, db, "+05:30")
	cfg, err := gomysql.ParseDSN(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ParseTime = true
	cfg.Params = map[string]string{"time_zone": "'+05:30'"}
	cfg.Loc = time.UTC
	conn, err := newZoneConnector(cfg, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	pool := sql.OpenDB(conn)
	defer pool.Close()
	lease, created, now := readLease(t, pool, 8)
	if _, off := now.Zone(); off != 5*3600+1800 || now.Location().String() != "+05:30" {
		t.Errorf("NOW(6) read in %v (offset %d), want +05:30", now.Location(), off)
	}
	if d := lease.Sub(now); d < 50*time.Minute || d > time.Hour {
		t.Errorf("lease_until - NOW(6) = %v, want about 1h", d)
	}
	near(t, "created_at", created, written, 5*time.Second)
}

// TestTimeZoneUnknownToServer: a zone name the server has no tables for is
// a connection error that says what to do, not a failed statement per
// query.
func TestTimeZoneUnknownToServer(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	var n int
	if err := db.SQL.QueryRow("SELECT COUNT(*) FROM mysql.time_zone_name WHERE Name = 'Asia/Shanghai'").Scan(&n); err != nil || n > 0 {
		t.Skipf("the server knows Asia/Shanghai (%d, %v)", n, err)
	}
	r, err := OpenWith(db.DSN, Options{Timeout: 5 * time.Second, TimeZone: "Asia/Shanghai"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	err = r.Ping(context.Background())
	var ce *ConnError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), `the server refused mysql.time_zone "Asia/Shanghai"`) ||
		!strings.Contains(err.Error(), `set mysql.time_zone to an offset such as "+08:00"`) {
		t.Errorf("Ping = %v (%T)", err, err)
	}
	if !isConnError(err) {
		t.Errorf("not a connection error: %v", err)
	}
}

// TestSessionVariableUnknownToServer: a session variable of the DSN that
// the server does not have (max_execution_time is MySQL's; MariaDB's is
// max_statement_time) fails every connection: a connection error with the
// fix, not a failed query per step (READ_ERROR).
func TestSessionVariableUnknownToServer(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	var n int
	if err := db.SQL.QueryRow("SELECT COUNT(*) FROM information_schema.SESSION_VARIABLES WHERE VARIABLE_NAME = 'MAX_EXECUTION_TIME'").Scan(&n); err != nil || n > 0 {
		t.Skipf("the server has max_execution_time (%d, %v)", n, err)
	}
	r, err := OpenWith(withParams(t, db.DSN, nil, map[string]string{"max_execution_time": "1000"}), Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.ReadOperation(context.Background(), settlementPipeline(), "", "PAY-1")
	var ce *ConnError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "the server refused the session variables of the DSN") || !strings.Contains(err.Error(), "max_execution_time") {
		t.Errorf("ReadOperation = %v (%T), want a *ConnError naming the variable", err, err)
	}
}

// TestOpenRefusesWhatCheckDSNRefuses: Open itself never hands the driver a
// DSN it would panic on (strict), or one whose unknown parameters it would
// send to the server as SQL; the message never holds the password.
func TestOpenRefusesWhatCheckDSNRefuses(t *testing.T) {
	for _, c := range []struct{ dsn, want string }{
		{"u:pw-s3cret@tcp(127.0.0.1:1)/db?strict=true", `has parameter "strict", which opctl refuses`},
		{"u:pw-s3cret@tcp(127.0.0.1:1)/db?sql_mode=%27%27", `has unknown parameter "sql_mode"`},
		{"u:pw-s3cret@tcp(127.0.0.1:1)/", `names no database`},
		{"u:pw-s3cret@127.0.0.1:1/db", `has its address outside tcp(...)`},
	} {
		t.Run(c.want, func(t *testing.T) {
			r, err := OpenWith(c.dsn, Options{})
			if err == nil {
				r.Close()
				t.Fatalf("OpenWith(%q) accepted it", c.dsn)
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "pw-s3cret") {
				t.Errorf("OpenWith(%q) = %v", c.dsn, err)
			}
		})
	}
	if _, err := OpenWith("u@tcp(h)/db", Options{TimeZone: "Local"}); err == nil || !strings.Contains(err.Error(), `mysql.time_zone "Local" is not a time zone`) {
		t.Errorf("time zone Local: %v", err)
	}
}

// BenchmarkFirstRead is the read of a command that has just started (where):
// a new pool, its connections opened by the statements of one operation
// (the first of them also reads the server's time zone), then closed.
func BenchmarkFirstRead(b *testing.B) {
	for _, rtt := range []time.Duration{0, time.Millisecond} {
		b.Run("rtt="+rtt.String(), func(b *testing.B) {
			dsn := benchDSN(b, rtt)
			p := settlementPipeline()
			ctx := context.Background()
			for b.Loop() {
				r, err := Open(dsn, 10*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if ev, err := r.ReadOperation(ctx, p, "opctl_audit", "PAY-1"); err != nil || len(ev.Steps[0].Rows) != 2 {
					b.Fatalf("read: %v", err)
				}
				r.Close()
			}
		})
	}
}
