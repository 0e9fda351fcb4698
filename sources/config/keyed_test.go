package config

import (
	"strings"
	"testing"
)

// TestCutKeyedSelect: which snippets a batched read may join with its keys
// (each operation's rows then are exactly its own), and where the cuts are.
func TestCutKeyedSelect(t *testing.T) {
	for _, c := range []struct {
		name, q string
		ok      bool
	}{
		{"plain", "SELECT id, amount FROM ledger_entry WHERE biz_order_id = ?", true},
		{"correlated NOT EXISTS", "SELECT j.id FROM balance_journal j WHERE j.biz_id = ? AND NOT EXISTS (SELECT 1 FROM balance_journal r WHERE r.reverses_id = j.id)", true},
		{"join", "SELECT a.id, b.v FROM a JOIN b ON b.a_id = a.id WHERE a.k = ?", true},
		{"comma join", "SELECT a.id FROM a, b WHERE b.a_id = a.id AND a.k = ?", true},
		{"placeholder in the list", "SELECT ? AS k, id FROM t WHERE k = 'x'", true},
		{"qualified star", "SELECT t.* FROM t WHERE k = ?", true},
		{"scalar functions", "SELECT COALESCE(a, 0), DATE_FORMAT(d, '%Y'), CAST(x AS CHAR) FROM t WHERE k = ?", true},
		{"scalar subquery with an aggregate", "SELECT id, (SELECT COUNT(*) FROM r WHERE r.id = t.id) AS n FROM t WHERE k = ?", true},
		{"aggregate in a subquery of WHERE", "SELECT id FROM t WHERE k = ? AND v > (SELECT AVG(v) FROM t)", true},
		{"keywords in strings and comments", "SELECT id FROM t WHERE k = ? AND note <> 'GROUP BY x' /* ORDER BY */ -- LIMIT 1\n", true},
		{"index hint", "SELECT id FROM t FORCE INDEX (ix_k) WHERE k = ?", true},
		{"lower case", "select id from t where k = ?", true},

		{"count", "SELECT COUNT(*) FROM t WHERE k = ?", false},
		{"max with space", "SELECT MAX (id) FROM t WHERE k = ?", false},
		{"unknown function", "SELECT my_agg(v) FROM t WHERE k = ?", false},
		{"quoted function", "SELECT `my_agg`(v) FROM t WHERE k = ?", false},
		{"window", "SELECT ROW_NUMBER() OVER (ORDER BY id) FROM t WHERE k = ?", false},
		{"star", "SELECT * FROM t WHERE k = ?", false},
		{"multiplication", "SELECT a * 2 FROM t WHERE k = ?", false},
		{"distinct", "SELECT DISTINCT v FROM t WHERE k = ?", false},
		{"straight join", "SELECT STRAIGHT_JOIN a.id FROM a JOIN b ON b.id = a.id WHERE a.k = ?", false},
		{"sql modifier", "SELECT SQL_NO_CACHE id FROM t WHERE k = ?", false},
		{"group by", "SELECT k FROM t WHERE k = ? GROUP BY k", false},
		{"having", "SELECT k FROM t WHERE k = ? HAVING k > 0", false},
		{"order by", "SELECT id FROM t WHERE k = ? ORDER BY id", false},
		{"limit", "SELECT id FROM t WHERE k = ? LIMIT 1", false},
		{"union", "SELECT id FROM t WHERE k = ? UNION SELECT id FROM u", false},
		{"for update", "SELECT id FROM t WHERE k = ? FOR UPDATE", false},
		{"lock in share mode", "SELECT id FROM t WHERE k = ? LOCK IN SHARE MODE", false},
		{"into", "SELECT id INTO @x FROM t WHERE k = ?", false},
		{"variable", "SELECT @n := id FROM t WHERE k = ?", false},
		{"no from", "SELECT ? AS k", false},
		{"two placeholders", "SELECT id FROM t WHERE k = ? OR j = ?", false},
		{"no placeholder", "SELECT id FROM t", false},
		{"not a select", "DELETE FROM t WHERE k = ?", false},
		{"unbalanced", "SELECT id FROM t WHERE (k = ?", false},
		{"unterminated quote", "SELECT id FROM t WHERE k = ? AND x = 'a", false},
		{"system time", "SELECT id FROM t FOR SYSTEM_TIME ALL WHERE k = ?", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, ok := CutKeyedSelect(c.q)
			if ok != c.ok {
				t.Fatalf("CutKeyedSelect(%q) ok = %v, want %v", c.q, ok, c.ok)
			}
			if !ok {
				return
			}
			checkCuts(t, c.q, k)
		})
	}
}

// checkCuts checks that the cuts of q are where CutKeyedSelect says.
func checkCuts(t *testing.T, q string, k KeyedSelect) {
	t.Helper()
	if k.AfterSelect < 6 || !strings.EqualFold(q[k.AfterSelect-6:k.AfterSelect], "SELECT") {
		t.Errorf("%q: AfterSelect %d does not follow SELECT", q, k.AfterSelect)
	}
	if k.AfterFrom < 4 || k.AfterFrom > len(q) || !strings.EqualFold(q[k.AfterFrom-4:k.AfterFrom], "FROM") || k.AfterFrom <= k.AfterSelect {
		t.Errorf("%q: AfterFrom %d does not follow FROM", q, k.AfterFrom)
	}
	if k.Placeholder < 0 || k.Placeholder >= len(q) || q[k.Placeholder] != '?' {
		t.Errorf("%q: Placeholder %d is not the ?", q, k.Placeholder)
	}
}

// FuzzCutKeyedSelect: no snippet makes the cut panic, and every cut it
// returns is where it says, in a snippet the config accepts.
func FuzzCutKeyedSelect(f *testing.F) {
	for _, q := range []string{
		"SELECT id FROM t WHERE k = ?",
		"SELECT j.id FROM balance_journal j WHERE j.biz_id = ? AND NOT EXISTS (SELECT 1 FROM r WHERE r.id = j.id)",
		"SELECT ? AS k, `from` FROM `select` WHERE x = 'FROM ?'",
		"SELECT COUNT(*) FROM t WHERE k = ?",
		"select a from b where c = ? /* ? */ -- ?\n",
		"SELECT (SELECT 1 FROM x WHERE y = ?) FROM t",
		"SELECT id FROM t WHERE k = \"?\\\"\" AND j = ?",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		k, ok := CutKeyedSelect(q)
		if !ok {
			return
		}
		if checkQuery(q) != "" {
			t.Fatalf("cut a snippet the config refuses: %q", q)
		}
		checkCuts(t, q, k)
	})
}

// TestPlainLookup: which snippets a hybrid read batches (a lookup of the
// key in one table) and which it reads per operation (anything whose plan
// for many keys opctl cannot know).
func TestPlainLookup(t *testing.T) {
	for _, c := range []struct {
		name, q string
		ok      bool
	}{
		{"plain", "SELECT id, direction, amount, created_at FROM ledger_entry WHERE biz_order_id = ?", true},
		{"constant beside the key", "SELECT id, kind, created_at FROM outbox WHERE biz_id = ? AND kind = 'notice'", true},
		{"key last", "SELECT request_id, sent_at FROM step_intent WHERE step = 'notify' AND biz_id = ?", true},
		{"placeholder first", "SELECT id FROM t WHERE ? = t.k", true},
		{"alias", "SELECT j.id FROM debit_log j WHERE j.biz_id = ?", true},
		{"alias with AS", "SELECT j.id FROM debit_log AS j WHERE j.biz_id = ?", true},
		{"schema-qualified", "SELECT status, updated_at FROM seed003.orders WHERE order_id = ?", true},
		{"quoted names", "SELECT `id` FROM `my db`.`t` WHERE `k` = ?", true},
		{"IN list of constants", "SELECT id FROM t WHERE k = ? AND kind IN ('A', 'B')", true},
		{"scalar function in the list", "SELECT COALESCE(a, 0) FROM t WHERE k = ?", true},
		{"lower case", "select id from t where k = ?", true},

		{"NOT EXISTS", "SELECT j.id FROM debit_log j WHERE j.biz_id = ? AND j.kind = 'DEBIT' AND NOT EXISTS (SELECT 1 FROM debit_log r WHERE r.kind = 'REVERSAL' AND r.reverses_id = j.id)", false},
		{"IN subquery", "SELECT id FROM t WHERE k = ? AND id IN (SELECT t_id FROM r)", false},
		{"scalar subquery in the list", "SELECT id, (SELECT COUNT(*) FROM r WHERE r.id = t.id) AS n FROM t WHERE k = ?", false},
		{"join", "SELECT a.id, b.v FROM a JOIN b ON b.a_id = a.id WHERE a.k = ?", false},
		{"left join", "SELECT a.id FROM a LEFT JOIN b ON b.a_id = a.id WHERE a.k = ?", false},
		{"comma join", "SELECT a.id FROM a, b WHERE b.a_id = a.id AND a.k = ?", false},
		{"derived table", "SELECT d.id FROM (SELECT id, k FROM t) AS d WHERE d.k = ?", false},
		{"index hint", "SELECT id FROM t FORCE INDEX (ix_k) WHERE k = ?", false},
		{"no WHERE", "SELECT ? AS k, id FROM t", false},
		{"placeholder in the list", "SELECT ? AS k, id FROM t WHERE k = 'x'", false},
		{"OR", "SELECT id FROM t WHERE k = ? OR alt = 'x'", false},
		{"OR beside", "SELECT id FROM t WHERE kind = 'A' OR k = ?", false},
		{"pipes", "SELECT id FROM t WHERE k = ? || alt = 'x'", false},
		{"XOR", "SELECT id FROM t WHERE k = ? XOR alt = 'x'", false},
		{"key in parentheses", "SELECT id FROM t WHERE (k = ?)", false},
		{"key not compared for equality", "SELECT id FROM t WHERE k >= ?", false},
		{"key not equal", "SELECT id FROM t WHERE k != ?", false},
		{"null-safe equality", "SELECT id FROM t WHERE k <=> ?", false},
		{"key in an expression", "SELECT id FROM t WHERE k = CONCAT(?, '-x')", false},
		{"column in an expression", "SELECT id FROM t WHERE LOWER(k) = ?", false},
		{"NOT before the term", "SELECT id FROM t WHERE NOT k = ?", false},
		{"arithmetic after the key", "SELECT id FROM t WHERE ? = k + 1", false},
		{"order by", "SELECT id FROM t WHERE k = ? ORDER BY id", false},
		{"count", "SELECT COUNT(*) FROM t WHERE k = ?", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := PlainLookup(c.q); got != c.ok {
				t.Errorf("PlainLookup(%q) = %v, want %v", c.q, got, c.ok)
			}
		})
	}
}
