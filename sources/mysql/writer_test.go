package mysql

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
)

func TestWithLock(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"SELECT id FROM j WHERE biz_id = ?", "SELECT id FROM j WHERE biz_id = ?\nFOR UPDATE"},
		{"SELECT id FROM j WHERE biz_id = ?;\n", "SELECT id FROM j WHERE biz_id = ?\nFOR UPDATE"},
		// A trailing comment must not swallow the lock.
		{"SELECT id FROM j WHERE biz_id = ? -- newest first", "SELECT id FROM j WHERE biz_id = ? -- newest first\nFOR UPDATE"},
		{"SELECT id FROM j WHERE biz_id = ? # the debit", "SELECT id FROM j WHERE biz_id = ? # the debit\nFOR UPDATE"},
		// A query that already locks is left as it is.
		{"SELECT id FROM j WHERE biz_id = ? FOR UPDATE", "SELECT id FROM j WHERE biz_id = ? FOR UPDATE"},
		{"SELECT id FROM j WHERE biz_id = ? lock in share mode", "SELECT id FROM j WHERE biz_id = ? lock in share mode"},
		{"SELECT id FROM j WHERE biz_id = ? FOR SHARE;", "SELECT id FROM j WHERE biz_id = ? FOR SHARE"},
		// A comment that says FOR UPDATE does not lock.
		{"SELECT id FROM j WHERE biz_id = ? -- no FOR UPDATE", "SELECT id FROM j WHERE biz_id = ? -- no FOR UPDATE\nFOR UPDATE"},
		{"SELECT id FROM j WHERE biz_id = ? /* FOR UPDATE */", "SELECT id FROM j WHERE biz_id = ? /* FOR UPDATE */\nFOR UPDATE"},
		{"SELECT id FROM j WHERE biz_id = ? FOR UPDATE -- locks", "SELECT id FROM j WHERE biz_id = ? FOR UPDATE -- locks"},
		// Nor does a string.
		{"SELECT id FROM j WHERE note = 'FOR UPDATE' AND biz_id = ?", "SELECT id FROM j WHERE note = 'FOR UPDATE' AND biz_id = ?\nFOR UPDATE"},
	} {
		if got := withLock(c.in); got != c.want {
			t.Errorf("withLock(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestClipKeepsWholeCharacters(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"ann", 128, "ann"},
		{"abcdef", 4, "abcd"},
		{"aé", 2, "a"},   // é is 2 bytes: not cut in half
		{"aé", 3, "aé"},  // exactly fits
		{"€€", 4, "€"},   // € is 3 bytes
		{"€€", 2, ""},    // not even one fits
		{"日本語", 7, "日本"}, // 3-byte characters
	} {
		got := clip(c.in, c.n)
		if got != c.want || !utf8.ValidString(got) || len(got) > c.n {
			t.Errorf("clip(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
	long := strings.Repeat("é", sources.MaxOperator) // 2×MaxOperator bytes
	if got := clip(long, sources.MaxOperator); len(got) != sources.MaxOperator || !utf8.ValidString(got) {
		t.Errorf("clip of %d bytes of é: %d bytes, valid UTF-8 %v", len(long), len(got), utf8.ValidString(got))
	}
}

func TestSplitKeepsColumnTypes(t *testing.T) {
	res := result{cols: []string{"opctl_op", "id", "delta"}, types: []string{"BIGINT", "BIGINT", "DECIMAL"},
		rows: [][]sources.Value{{int64(0), int64(1), "-5.00"}, {int64(1), int64(2), "7.10"}}}
	results := [][]result{make([]result, 1), make([]result, 1)}
	split(res, 2, query{kind: kindEvidence}, 0, results)
	for i, r := range results {
		got := r[0]
		if strings.Join(got.cols, ",") != "id,delta" || strings.Join(got.types, ",") != "BIGINT,DECIMAL" || len(got.rows) != 1 {
			t.Errorf("operation %d: cols %v types %v rows %v; want cols [id delta], types [BIGINT DECIMAL], one row", i, got.cols, got.types, got.rows)
		}
	}
}

// TestLockRowsLocksBehindATrailingComment: the evidence query ends in a
// comment; the rows it read are still locked until the transaction ends.
func TestLockRowsLocksBehindATrailingComment(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	db.Exec(t, `CREATE TABLE j (id BIGINT PRIMARY KEY, biz_id VARCHAR(64) NOT NULL, delta DECIMAL(65,30) NOT NULL, KEY (biz_id)) ENGINE=InnoDB;
INSERT INTO j VALUES (1, 'PAY-1', -5), (2, 'PAY-1', -5)`)
	w, err := OpenWriter(db.DSN, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	tx, err := w.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	lr, err := tx.LockRows(ctx, "SELECT id, delta FROM j WHERE biz_id = ? ORDER BY id -- newest last", "PAY-1")
	if err != nil {
		t.Fatalf("LockRows: %v", err)
	}
	if len(lr.Values) != 2 || len(lr.Decimal) != 2 || lr.Decimal[0] || !lr.Decimal[1] {
		t.Fatalf("LockRows = %+v, want 2 rows, delta DECIMAL", lr)
	}

	other, err := db.SQL.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1"); err != nil {
		t.Fatal(err)
	}
	_, err = other.ExecContext(ctx, "UPDATE j SET delta = 0 WHERE id = 2")
	if serverErrorNumber(err) != 1205 {
		t.Fatalf("UPDATE of a row LockRows read: %v, want a lock wait timeout (1205): the row was not locked", err)
	}
}
