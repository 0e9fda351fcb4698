package binlog

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
)

// shared is the package's binlog test server: a second MariaDB with a ROW
// binlog, started by the first test that needs it.
var shared testenv.SharedBinlog

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// seed000 is seed 000's schema: the plain guarded UPDATE on account_balance,
// ledger_entry with its unique (biz_order_id, direction), no journal.
const seed000 = `
CREATE TABLE account_balance (
  account_id VARCHAR(64) CHARACTER SET utf8mb4 NOT NULL PRIMARY KEY,
  balance DECIMAL(30,10) NOT NULL,
  updated_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3));
CREATE TABLE ledger_entry (
  id BIGINT AUTO_INCREMENT PRIMARY KEY,
  biz_order_id VARCHAR(64) NOT NULL, direction VARCHAR(8) NOT NULL, amount DECIMAL(30,10) NOT NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  UNIQUE KEY uk_order_dir (biz_order_id, direction)) DEFAULT CHARSET=utf8mb4;`

type fixture struct {
	db     *testenv.DB
	reader *Reader
	t0     time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv := shared.Get(t)
	db := srv.MySQL(t)
	db.Exec(t, seed000)
	r, err := New(db.DSN, 0, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The window starts at this second: never before the server's first
	// binlog, which would make it a purged window.
	return &fixture{db: db, reader: r, t0: time.Now().Truncate(time.Second)}
}

// debit runs the seed's debit, and the ledger insert in the same
// transaction when ledger is set (a duplicate ledger row is ignored, as the
// seed's consumer did).
func (f *fixture) debit(t testing.TB, account, amount, bizID string, ledger bool) {
	t.Helper()
	tx, err := f.db.SQL.Begin()
	testenv.Must(t, err, "begin")
	defer tx.Rollback() //nolint:errcheck // after Commit: a no-op
	// The amount is bound as a DECIMAL, as the seed's consumer binds a
	// BigDecimal: a string would make the arithmetic a DOUBLE.
	res, err := tx.Exec("UPDATE account_balance SET balance = balance - CAST(? AS DECIMAL(30,10)) WHERE account_id = ? AND balance >= CAST(? AS DECIMAL(30,10))", amount, account, amount)
	testenv.Must(t, err, "debit")
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("debit of %s changed %d rows", account, n)
	}
	if ledger {
		_, err = tx.Exec("INSERT IGNORE INTO ledger_entry (biz_order_id, direction, amount) VALUES (?, 'DEBIT', CAST(? AS DECIMAL(30,10)))", bizID, amount)
		testenv.Must(t, err, "ledger")
	}
	testenv.Must(t, tx.Commit(), "commit")
}

func (f *fixture) request(account string) sources.BinlogRequest {
	return sources.BinlogRequest{Schema: f.db.Name, Table: "account_balance", KeyColumn: "account_id", DeltaColumn: "balance",
		Key: account, From: f.t0, To: time.Now().Add(2 * time.Second),
		TxSchema: f.db.Name, TxTable: "ledger_entry", TxColumn: "biz_order_id"}
}

func (f *fixture) changes(t *testing.T, req sources.BinlogRequest, bizID, delta string) []sources.Row {
	t.Helper()
	read, err := f.reader.Changes(context.Background(), req)
	if err != nil {
		t.Fatalf("Changes: %v", err)
	}
	rows, err := sources.AttributeChanges(read.Changes, bizID, delta, req.TxTable != "")
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func col(r sources.Row, name string) string {
	v, _ := r.Get(name)
	s, _ := v.(string)
	return s
}

func TestChanges(t *testing.T) {
	cases := []struct {
		name    string
		account string
		amount  string
		run     func(t *testing.T, f *fixture, account, amount string)
		bizID   string
		want    []string // attribution of each counted change, in order
		before  []string
	}{
		{name: "double debit, the second without its ledger row", account: "A-1", amount: "30.0000000000",
			run: func(t *testing.T, f *fixture, a, amt string) {
				f.debit(t, a, amt, "PAY-1", true)
				f.debit(t, a, amt, "PAY-1", true) // the ledger insert is ignored: unique key
			},
			// The redelivery's ledger insert wrote nothing: its debit is tied
			// to the operation by the message alone.
			bizID: "PAY-1", want: []string{"transaction", "message"}, before: []string{"100.0000000000", "70.0000000000"}},
		{name: "double debit, autocommit statements", account: "A-2", amount: "30.0000000000",
			run: func(t *testing.T, f *fixture, a, amt string) {
				f.debit(t, a, amt, "", false)
				f.debit(t, a, amt, "", false)
			},
			bizID: "PAY-2", want: []string{"message", "message"}},
		{name: "single debit next to other operations' debits of the same amount", account: "A-3", amount: "30.0000000000",
			run: func(t *testing.T, f *fixture, a, amt string) {
				f.debit(t, a, amt, "PAY-OTHER-1", true)
				f.debit(t, a, amt, "PAY-3", true)
				f.debit(t, a, amt, "PAY-OTHER-2", true)
				f.debit(t, "A-3b", amt, "PAY-OTHER-3", true)
			},
			bizID: "PAY-3", want: []string{"transaction"}, before: []string{"70.0000000000"}},
		{name: "a debit and its reversal: the reversal is not a debit", account: "A-4", amount: "30.0000000000",
			run: func(t *testing.T, f *fixture, a, amt string) {
				f.debit(t, a, amt, "PAY-4", true)
				f.db.Exec(t, "UPDATE account_balance SET balance = balance - CAST(? AS DECIMAL(65,30)) WHERE account_id = ?", "-30.0000000000", a)
			},
			bizID: "PAY-4", want: []string{"transaction"}},
		{name: "DECIMAL precision beyond a float", account: "A-5", amount: "0.0000000001",
			run: func(t *testing.T, f *fixture, a, amt string) {
				f.db.Exec(t, "UPDATE account_balance SET balance = ? WHERE account_id = ?", "12345678901234567890.1234567891", a)
				f.debit(t, a, amt, "", false)
				f.debit(t, a, "0.0000000002", "", false) // another amount: not this operation's delta
			},
			bizID: "PAY-5", want: []string{"message"}, before: []string{"12345678901234567890.1234567891"}},
		{name: "multibyte key", account: "账户-α-😀", amount: "30.0000000000",
			run: func(t *testing.T, f *fixture, a, amt string) {
				f.debit(t, a, amt, "单-1", true)
				f.debit(t, a, amt, "单-1", true)
			},
			bizID: "单-1", want: []string{"transaction", "message"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			for _, a := range []string{c.account, "A-3b"} {
				f.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES (?, 100)", a)
			}
			c.run(t, f, c.account, c.amount)
			rows := f.changes(t, f.request(c.account), c.bizID, "-"+c.amount)
			var got []string
			for _, r := range rows {
				got = append(got, col(r, "attribution"))
				if k, _ := r.Get("key"); k != c.account {
					t.Errorf("key = %v, want %q", k, c.account)
				}
				if col(r, "delta") != "-"+c.amount {
					t.Errorf("delta = %q, want -%s", col(r, "delta"), c.amount)
				}
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Fatalf("attributions = %v, want %v (rows %v)", got, c.want, rows)
			}
			for i, b := range c.before {
				if col(rows[i], "before") != b {
					t.Errorf("row %d before = %q, want %q", i, col(rows[i], "before"), b)
				}
			}
			if len(rows) > 1 && col(rows[0], "id") == col(rows[1], "id") {
				t.Errorf("two changes with one identity %q", col(rows[0], "id"))
			}
		})
	}
}

// TestChangesUnavailable: the window purged from the binlog, a binlog in
// another format, a server without binlog: an *UnavailableError each.
func TestChangesUnavailable(t *testing.T) {
	t.Run("window purged", func(t *testing.T) {
		f := newFixture(t)
		f.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES ('P-1', 100)")
		f.debit(t, "P-1", "30", "PAY-P", true)
		req := f.request("P-1")
		time.Sleep(1100 * time.Millisecond) // the next file starts a second later
		testenv.PurgeBinlogs(t, f.db.SQL)
		_, err := f.reader.Changes(context.Background(), req)
		var ue *UnavailableError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "purged") {
			t.Fatalf("err = %v, want the window purged", err)
		}
	})
	t.Run("binlog_format STATEMENT", func(t *testing.T) {
		f := newFixture(t)
		f.db.Exec(t, "SET GLOBAL binlog_format = 'STATEMENT'")
		defer f.db.Exec(t, "SET GLOBAL binlog_format = 'ROW'")
		_, err := f.reader.Changes(context.Background(), f.request("X"))
		var ue *UnavailableError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "binlog_format is STATEMENT") {
			t.Fatalf("err = %v, want binlog_format", err)
		}
	})
	t.Run("log_bin off", func(t *testing.T) {
		srv := testenv.BinlogServerFor(t, testenv.BinlogOptions{ServerID: 9, NoBinlog: true})
		db := srv.MySQL(t)
		db.Exec(t, seed000)
		r, err := New(db.DSN, 0, 5*time.Second)
		testenv.Must(t, err, "new")
		_, err = r.Changes(context.Background(), sources.BinlogRequest{Schema: db.Name, Table: "account_balance", KeyColumn: "account_id", DeltaColumn: "balance", Key: "X", From: time.Now(), To: time.Now()})
		var ue *UnavailableError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "log_bin is OFF") {
			t.Fatalf("err = %v, want log_bin OFF", err)
		}
	})
}

// A wrong binlog password: the error names the server and the user, never
// the password.
func TestChangesWrongPassword(t *testing.T) {
	srv := shared.Get(t)
	db := srv.MySQL(t)
	dsn := strings.Replace(db.DSN, "root@", "root:s3cret-pw@", 1)
	r, err := New(dsn, 0, 5*time.Second)
	testenv.Must(t, err, "new")
	_, err = r.Changes(context.Background(), sources.BinlogRequest{Schema: db.Name, Table: "t", KeyColumn: "k", DeltaColumn: "d", Key: "1", From: time.Now(), To: time.Now()})
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") || !strings.Contains(err.Error(), "connect as root") {
		t.Fatalf("err = %v", err)
	}
	if _, err := New("u:s3cret-pw@unix(/tmp/s.sock)/db", 0, 0); err == nil || strings.Contains(err.Error(), "s3cret-pw") {
		t.Fatalf("unix DSN: %v", err)
	}
}

// TestOldest: how far back the binlog reaches is its oldest file's first
// event: on the test server, started moments ago, a time of the last
// minutes and never in the future.
func TestOldest(t *testing.T) {
	f := newFixture(t)
	before := time.Now()
	got, err := f.reader.Oldest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got.IsZero() || got.After(before.Add(time.Second)) || got.Before(before.Add(-30*time.Minute)) {
		t.Errorf("oldest binlog event at %v, want within the last 30 minutes of %v", got, before)
	}
}
