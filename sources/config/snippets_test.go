package config

import (
	"slices"
	"testing"
)

// Lines of baseYAML: 28 the debit's evidence, 31 its first reverse
// statement, 35 the notify intent, 44 the entity query.
func TestSnippetChecks(t *testing.T) {
	const (
		ev  = `        evidence: `
		rev = `          - `
	)
	tests := []struct {
		name  string
		edits map[int]string
		want  []wantErr // nil: the file is valid
	}{
		// evidence, intent and entity.query: one SELECT with one ?
		{"evidence with a second statement", map[int]string{28: ev + `"SELECT id, account_id, delta FROM j WHERE biz_id = ?; DELETE FROM j"`},
			[]wantErr{{28, `step "debit": evidence holds more than one statement ("DELETE" follows a ";"): write one statement`}}},
		{"evidence with a trailing semicolon", map[int]string{28: ev + `"SELECT id, account_id, delta FROM j WHERE biz_id = ?;"`},
			[]wantErr{{28, `evidence ends with ";": write the statement without it`}}},
		{"evidence with a semicolon and a comment after it", map[int]string{28: ev + `"SELECT id, account_id, delta FROM j WHERE biz_id = ? ; -- done"`},
			[]wantErr{{28, `evidence ends with ";"`}}},
		{"intent with a second statement", map[int]string{35: `        intent: "SELECT request_id, sent_at, acked_at, result FROM step_intent WHERE biz_id = ?; SELECT 1"`},
			[]wantErr{{35, `step "notify": intent holds more than one statement ("SELECT" follows a ";")`}}},
		{"entity query with a second statement", map[int]string{44: `      query: "SELECT status FROM orders WHERE order_id = ?;DROP TABLE orders"`},
			[]wantErr{{44, `pipeline "settlement": entity.query holds more than one statement ("DROP" follows a ";")`}}},
		{"evidence with an executable comment", map[int]string{28: ev + `"SELECT id, account_id, delta FROM j WHERE biz_id = ? /*!50000 OR k = ? */"`},
			[]wantErr{{28, `evidence has a /*! ... */ comment, which MySQL executes as SQL`}}},
		{"entity query with a MariaDB executable comment", map[int]string{44: `      query: "SELECT status FROM orders WHERE order_id = ? /*M! OR 1 = 1 */"`},
			[]wantErr{{44, `entity.query has a /*! ... */ comment`}}},
		{"a comment before the SELECT", map[int]string{28: ev + `"/* the debits */ SELECT id, account_id, delta FROM j WHERE biz_id = ?"`}, nil},
		{"semicolons and question marks in strings and comments", map[int]string{28: ev + `"SELECT id, account_id, delta FROM j WHERE note <> ';?' AND biz_id = ? -- ; ?"`}, nil},
		{"an optimizer hint is a comment", map[int]string{28: ev + `"SELECT /*+ MAX_EXECUTION_TIME(1000) */ id, account_id, delta FROM j WHERE biz_id = ?"`}, nil},

		// reverse: one INSERT, UPDATE or DELETE
		{"reverse DROP TABLE", map[int]string{31: rev + `"DROP TABLE balance_journal"`},
			[]wantErr{{31, `step "debit": reverse[0] must be one INSERT, UPDATE or DELETE (it starts with "DROP"): a reverse statement undoes one evidence row`}}},
		{"reverse SELECT", map[int]string{31: rev + `"SELECT 1"`},
			[]wantErr{{31, `reverse[0] must be one INSERT, UPDATE or DELETE (it starts with "SELECT")`}}},
		{"reverse REPLACE", map[int]string{31: rev + `"REPLACE INTO account_balance (account_id) VALUES (:account_id)"`},
			[]wantErr{{31, `(it starts with "REPLACE")`}}},
		{"reverse with a second statement", map[int]string{31: rev + `"UPDATE account_balance SET balance = balance - :delta WHERE account_id = :account_id; DELETE FROM account_balance"`},
			[]wantErr{{31, `reverse[0] holds more than one statement ("DELETE" follows a ";")`}}},
		{"reverse with a ? placeholder", map[int]string{31: rev + `"UPDATE account_balance SET balance = balance - ? WHERE account_id = :account_id"`},
			[]wantErr{{31, `reverse[0] has a ? placeholder: reverse statements bind :column names only (write :biz_id, or :column`}}},
		{"reverse with an unterminated quote", map[int]string{31: rev + `"UPDATE account_balance SET note = 'x WHERE account_id = :account_id"`},
			[]wantErr{{31, `reverse[0] has an unterminated '...' quote`}}},
		{"reverse lower case, a comment first", map[int]string{31: rev + `"-- undo\n delete from account_balance where account_id = :account_id"`}, nil},

		// reverse :names: :biz_id or columns the evidence returns
		{"reverse binds a column the evidence does not return", map[int]string{31: rev + `"UPDATE account_balance SET balance = balance - :amount WHERE account_id = :account_id"`},
			[]wantErr{{31, `reverse[0] binds :amount, which the evidence does not return: a reverse statement binds :biz_id and the columns of its evidence row (id, account_id, delta)`}}},
		{"a misspelt name gets a suggestion", map[int]string{31: rev + `"UPDATE account_balance SET balance = balance - :delta WHERE account_id = :acount_id"`},
			[]wantErr{{31, `reverse[0] binds :acount_id (did you mean :account_id?), which the evidence does not return`}}},
		{"names are matched in case, as the plan binds them", map[int]string{31: rev + `"UPDATE account_balance SET balance = balance - :Delta WHERE account_id = :account_id"`},
			[]wantErr{{31, `binds :Delta (did you mean :delta?)`}}},
		{"every unknown name, once", map[int]string{31: rev + `"UPDATE t SET a = :x, b = :y, c = :x WHERE biz = :biz_id"`},
			[]wantErr{{31, `reverse[0] binds :x, :y, which the evidence does not return`}}},
		{"aliases name the columns", map[int]string{28: ev + "\"SELECT j.id AS jid, j.delta d, `account_id` FROM balance_journal j WHERE j.biz_id = ?\"",
			31: rev + `"UPDATE account_balance SET balance = balance - :d WHERE account_id = :account_id AND :jid > 0 AND :delta < 0"`},
			[]wantErr{{31, `reverse[0] binds :delta, which the evidence does not return: a reverse statement binds :biz_id and the columns of its evidence row (jid, d, account_id)`}}},
		{"with * the plan checks the names", map[int]string{28: ev + `"SELECT * FROM balance_journal WHERE biz_id = ?"`,
			31: rev + `"UPDATE account_balance SET balance = balance - :anything WHERE account_id = :account_id"`}, nil},
		{"with an expression without alias the plan checks the names", map[int]string{28: ev + `"SELECT id, delta * -1, account_id FROM balance_journal WHERE biz_id = ?"`,
			31: rev + `"UPDATE account_balance SET balance = balance - :anything WHERE account_id = :account_id"`}, nil},
		{"names are not checked against evidence that is itself wrong", map[int]string{28: ev + `"SELECT id FROM j WHERE biz_id = ? AND k = ?"`},
			[]wantErr{{28, `evidence must contain exactly one ? placeholder (bound to the biz_id), found 2`}}},

		// every problem of the file at once, in line order
		{"all at once", map[int]string{28: ev + `"SELECT id, delta FROM j WHERE biz_id = ?"`,
			31: rev + "\"UPDATE b SET x = x - :delta WHERE id = :account_id\"\n" + rev + "\"DROP TABLE j\"\n" + rev + `"DELETE FROM j WHERE id = ?"`,
			35: `        intent: "SELECT request_id FROM i WHERE biz_id = ?; SELECT 2"`},
			[]wantErr{{31, `reverse[0] binds :account_id, which the evidence does not return`}, {32, `reverse[1] must be one INSERT, UPDATE or DELETE`},
				{33, `reverse[2] has a ? placeholder`}, {37, `intent holds more than one statement`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWithEnv("t.yaml", []byte(edit(t, baseYAML, tt.edits)), noEnv)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("want valid, got:\n%v", err)
				}
				return
			}
			checkErrs(t, err, tt.want)
		})
	}
}

func TestSelectColumns(t *testing.T) {
	tests := []struct {
		q    string
		want []string // nil: not known without running it
	}{
		{"SELECT id, account_id FROM j WHERE biz_id = ?", []string{"id", "account_id"}},
		{"select j.id, s.j.delta, `j`.`created_at` from j", []string{"id", "delta", "created_at"}},
		{"SELECT id AS ID, delta d, 'x' AS `odd name`, 1 n, COUNT(*) AS c FROM j", []string{"ID", "d", "odd name", "n", "c"}},
		{"SELECT DISTINCT id, CASE WHEN a THEN b ELSE c END AS k FROM j", []string{"id", "k"}},
		{"SELECT a, (SELECT MAX(x) FROM y WHERE y.a = j.a) AS mx FROM j", []string{"a", "mx"}},
		{"SELECT request_id, sent_at FROM i WHERE biz_id = ? UNION SELECT r, s FROM k", []string{"request_id", "sent_at"}},
		{"SELECT id, ROW_NUMBER() OVER (ORDER BY id) AS rn FROM j ORDER BY id", []string{"id", "rn"}},
		{"SELECT id /* , nope */, -- , nope\n delta FROM j", []string{"id", "delta"}},
		{"SELECT 1 AS one", []string{"one"}},
		{"SELECT id, delta FROM j FOR UPDATE", []string{"id", "delta"}},
		{"SELECT * FROM j", nil},
		{"SELECT id, j.* FROM j", nil},
		{"SELECT id, delta + 1 FROM j", nil},
		{"SELECT id, COUNT(*) FROM j", nil},
		{"SELECT id, -delta FROM j", nil},
		{"SELECT id, FROM j", nil},
		{"UPDATE j SET a = 1", nil},
		{"SELECT 'open", nil},
	}
	for _, tt := range tests {
		t.Run(tt.q, func(t *testing.T) {
			got, ok := selectColumns(tt.q)
			if ok != (tt.want != nil) || !slices.Equal(got, tt.want) {
				t.Errorf("selectColumns = %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
}
