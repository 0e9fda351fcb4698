package connect_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/connect"
)

// TestOpenAssemblesTheCollector: the Collector every triage reads with is
// built here from the clients, once: the reader, the prober, the Kafka
// reader or why there is none, the configured audit table and the timeout.
// Nothing connects (pools open on first use).
func TestOpenAssemblesTheCollector(t *testing.T) {
	for _, tc := range []struct {
		name    string
		brokers []string
		timeout time.Duration
	}{
		{"no brokers", nil, 0},
		{"brokers", []string{"127.0.0.1:1"}, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{MySQL: config.MySQL{DSN: "opctl:pw@tcp(127.0.0.1:1)/opctl"}, Kafka: config.Kafka{Brokers: tc.brokers, Version: "3.5.0"},
				Audit: config.Audit{Table: "ops_audit"}}
			c, err := connect.Open(cfg, connect.Options{Timeout: tc.timeout, SearchWindow: time.Minute, SearchLimit: 7})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := c.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}()
			wantTimeout := tc.timeout
			if wantTimeout == 0 {
				wantTimeout = sources.DefaultTimeout
			}
			col := c.Collector
			if col == nil || col.DB != c.Reader || col.Prober != c.Prober || col.AuditTable != "ops_audit" ||
				col.Timeout != wantTimeout || c.Timeout != wantTimeout || col.SearchWindow != time.Minute || col.SearchLimit != 7 {
				t.Fatalf("collector %+v (clients: timeout %v)", col, c.Timeout)
			}
			if col.KafkaMissing != c.KafkaMissing {
				t.Errorf("collector says Kafka is missing because %q, the clients %q", col.KafkaMissing, c.KafkaMissing)
			}
			if tc.brokers == nil {
				if col.Kafka != nil || c.Kafka != nil || !strings.Contains(col.KafkaMissing, "kafka.brokers is empty") {
					t.Errorf("no brokers: kafka %v, missing %q", col.Kafka, col.KafkaMissing)
				}
				return
			}
			if c.Kafka == nil || col.Kafka != c.Kafka || col.KafkaMissing != "" {
				t.Errorf("brokers: collector kafka %v, clients %v, missing %q", col.Kafka, c.Kafka, col.KafkaMissing)
			}
		})
	}
}

// TestOpenWriterValidates: the write path is opened after the same checks
// as the read path, and on mysql.write_dsn when set.
func TestOpenWriterValidates(t *testing.T) {
	if _, err := connect.OpenWriter(&config.Config{}, 0); err == nil || !strings.Contains(err.Error(), "mysql.dsn is empty") {
		t.Errorf("no DSN: %v", err)
	}
	cfg := &config.Config{MySQL: config.MySQL{DSN: "opctl:pw@tcp(127.0.0.1:1)/opctl", WriteDSN: "w:pw@tcp(127.0.0.2:1)/opctl"}}
	w, err := connect.OpenWriter(cfg, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !strings.Contains(w.Addr(), "127.0.0.2") {
		t.Errorf("writer on %s, want mysql.write_dsn's server", w.Addr())
	}
}

// TestOpenRefusesBrokenKafka: a broker that is not host:port, or SASL
// without its credentials, is a configuration error naming the fix, not a
// Kafka left out of every verdict (partial, exit 6).
func TestOpenRefusesBrokenKafka(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kafka config.Kafka
		want  string
	}{
		{"no port", config.Kafka{Brokers: []string{"no-port"}}, `config: kafka broker "no-port" is not host:port (e.g. 127.0.0.1:9092)`},
		{"port out of range", config.Kafka{Brokers: []string{"k1:9092", "k2:99999"}}, `config: kafka broker "k2:99999" has port "99999"; want a number from 1 to 65535`},
		{"no host", config.Kafka{Brokers: []string{":9092"}}, `config: kafka broker ":9092" has no host`},
		{"sasl without a password", config.Kafka{Brokers: []string{"k1:9092"}, SASL: &config.SASL{Mechanism: "PLAIN", User: "u"}}, `config: kafka.sasl.password is empty`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{MySQL: config.MySQL{DSN: "opctl:pw@tcp(127.0.0.1:1)/opctl"}, Kafka: tc.kafka}
			c, err := connect.Open(cfg, connect.Options{})
			if err == nil {
				c.Close()
				t.Fatalf("opened, Kafka missing because %q; want the error %q", c.KafkaMissing, tc.want)
			}
			var list config.ErrorList
			if !errors.As(err, &list) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v (%T), want a config.ErrorList with %q", err, err, tc.want)
			}
		})
	}
	// Every problem at once: the DSN's and the brokers'.
	cfg := &config.Config{MySQL: config.MySQL{DSN: "opctl:pw@tcp(127.0.0.1:1)/"}, Kafka: config.Kafka{Brokers: []string{"no-port"}}}
	_, err := connect.Open(cfg, connect.Options{})
	if err == nil || !strings.Contains(err.Error(), "names no database") || !strings.Contains(err.Error(), `"no-port" is not host:port`) {
		t.Errorf("err = %v, want both problems", err)
	}
}

// TestOpenSetsTheSessionTimeZone: the read path (where) and the write
// path (the guards of repair apply, under FOR UPDATE) both compare a lease
// with the database clock in mysql.time_zone, whatever the DSN's time_zone
// says, and read its DATETIMEs as the instants the consumer wrote.
func TestOpenSetsTheSessionTimeZone(t *testing.T) {
	db := testenv.MySQL(t)
	db.ExecFile(t, filepath.Join("..", "..", "testdata", "schema", "settlement.sql"))
	ctx := context.Background()
	// The consumer's session is in +05:30: it holds the lease for an hour.
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SET time_zone = '+05:30'",
		"INSERT INTO biz_operation (biz_id, status, version, owner, lease_until, msg_id, created_at, updated_at) VALUES ('TZ-1', 'DEBIT_DONE', 2, 'c-1', NOW(3) + INTERVAL 1 HOUR, 'm-1', NOW(3), NOW(3))",
		"SET time_zone = DEFAULT"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	var utc time.Time
	if err := db.SQL.QueryRow("SELECT UTC_TIMESTAMP(6)").Scan(&utc); err != nil {
		t.Fatal(err)
	}
	sep := "&"
	if !strings.Contains(db.DSN, "?") {
		sep = "?"
	}
	p := &config.Pipeline{Name: "p", Topic: "t", Group: "g",
		State: &config.State{Table: "biz_operation", Key: "biz_id", Status: "status", Owner: "owner", LeaseUntil: "lease_until", CreatedAt: "created_at", Terminal: []string{"DONE"}},
		Steps: []config.Step{{Name: "debit", Kind: config.KindLocal, DoneStatus: "DONE", Evidence: "SELECT id FROM balance_journal WHERE biz_id = ?"}}}
	cfg := &config.Config{MySQL: config.MySQL{DSN: db.DSN + sep + "time_zone=%27-08:00%27&loc=Local", TimeZone: "+05:30"}}
	c, err := connect.Open(cfg, connect.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	check := func(path string, st sources.StateRow, now time.Time) {
		t.Helper()
		if _, off := now.Zone(); off != 5*3600+1800 {
			t.Errorf("%s path: NOW(6) read as %v, want in +05:30", path, now)
		}
		if d := now.Sub(utc); d < -time.Minute || d > time.Minute {
			t.Errorf("%s path: NOW(6) = %v, %v from the server's UTC_TIMESTAMP %v", path, now, d, utc)
		}
		if !st.Found || !st.LeaseLive(now) || st.LeaseUntil.Sub(now) < 50*time.Minute {
			t.Errorf("%s path: lease %v at %v: want live for about an hour", path, st.LeaseUntil, now)
		}
		if st.CreatedAt == nil || st.CreatedAt.Sub(utc) < -time.Minute || st.CreatedAt.Sub(utc) > time.Minute {
			t.Errorf("%s path: created_at %v, want the instant it was written (about %v)", path, st.CreatedAt, utc)
		}
	}
	ev, err := c.Reader.ReadOperation(ctx, p, "", "TZ-1")
	if err != nil {
		t.Fatal(err)
	}
	check("read", ev.State, ev.Now)
	w, err := c.Writer()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := w.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	st, now, err := tx.LockState(ctx, p, "TZ-1")
	if err != nil {
		t.Fatal(err)
	}
	check("write", st, now)
}
