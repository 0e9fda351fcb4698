package mysql

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
)

func TestSweepSQL(t *testing.T) {
	for _, tc := range []struct {
		name        string
		s           Sweep
		after, upTo Bound
		want        string
		args        int
		err         string
	}{
		{name: "first page", s: Sweep{Table: "t", Index: "ix_k", KeyCol: "k"},
			want: "SELECT `k`, COUNT(*) FROM `t` FORCE INDEX (`ix_k`) GROUP BY `k` ORDER BY `k` LIMIT 10"},
		{name: "after", s: Sweep{Table: "t", KeyCol: "k"}, after: Bound{Set: true, Value: "a"},
			want: "SELECT `k`, COUNT(*) FROM `t` WHERE `k` > ? GROUP BY `k` ORDER BY `k` LIMIT 10", args: 1},
		{name: "range (a shard filters the groups returned)", s: Sweep{Table: "s.t", Index: "PRIMARY", KeyCol: "k", Shard: 1, Shards: 4},
			after: Bound{Set: true, Value: "a"}, upTo: Bound{Set: true, Value: "z"},
			want: "SELECT `k`, COUNT(*) FROM `s`.`t` FORCE INDEX (`PRIMARY`) WHERE `k` > ? AND `k` <= ? GROUP BY `k` ORDER BY `k` LIMIT 10", args: 2},
		{name: "bad table", s: Sweep{Table: "t; DROP", KeyCol: "k"}, err: "invalid identifier"},
		{name: "bad key", s: Sweep{Table: "t", KeyCol: "k`"}, err: "invalid identifier"},
		{name: "bad index", s: Sweep{Table: "t", KeyCol: "k", Index: "a b"}, err: "invalid identifier"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, args, err := sweepSQL(tc.s, tc.after, tc.upTo, 10)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || len(args) != tc.args {
				t.Errorf("sweepSQL =\n%s (%d args)\nwant\n%s (%d args)", got, len(args), tc.want, tc.args)
			}
		})
	}
	if _, _, err := sweepSQL(Sweep{Table: "t", KeyCol: "k"}, Bound{}, Bound{}, 0); err == nil {
		t.Error("limit 0: no error")
	}
}

// TestSweepPages: a sweep yields every distinct key once, in the index's
// order, whatever the page size, with its row count; spellings the
// collation makes equal (utf8mb4_general_ci: case, accents, trailing
// spaces) are one key, so a page never splits them; (after, upTo] bounds
// a page; integer keys page as integers; RangeRows reads the optimizer's
// estimate.
func TestSweepPages(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	db.Exec(t, `CREATE TABLE j (id BIGINT AUTO_INCREMENT PRIMARY KEY,
		biz_id VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL,
		n BIGINT NOT NULL, created_at DATETIME(3) NOT NULL, KEY ix_biz (biz_id), KEY ix_n (n), KEY ix_created (created_at))`)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var vals []string
	var args []any
	want := map[string]int64{}
	add := func(key string, n int64, spell ...string) {
		for _, s := range append([]string{key}, spell...) {
			vals = append(vals, "(?, ?, ?)")
			args = append(args, s, n, at)
			want[strings.ToLower(key)]++
		}
	}
	for i := range 300 {
		key := []string{"pay-%04d", "工单-%04d", `q'"\-%04d`}[i%3]
		add(fmt.Sprintf(key, i), int64(i%50))
	}
	add("pay-x", 7, "PAY-X", "pÁy-x", "pay-x ")
	db.Exec(t, "INSERT INTO j (biz_id, n, created_at) VALUES "+strings.Join(vals, ", "), args...)
	r, err := Open(db.DSN, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()

	sweepAll := func(t *testing.T, s Sweep, chunk int, upTo Bound) (map[string]int64, []string) {
		t.Helper()
		got := map[string]int64{}
		var order []string
		var after Bound
		for pages := 0; ; pages++ {
			if pages > 1000 {
				t.Fatal("the sweep does not end")
			}
			end, err := r.SweepPage(ctx, s, after, upTo, chunk, func(key []byte, n int64) {
				k := strings.ToLower(strings.TrimRight(string(key), " "))
				if _, dup := got[k]; dup {
					t.Errorf("key %q twice", key)
				}
				got[k] += n
				order = append(order, string(key))
			})
			if err != nil {
				t.Fatal(err)
			}
			if end.Keys > chunk {
				t.Fatalf("page of %d keys, chunk %d", end.Keys, chunk)
			}
			if end.Keys < chunk {
				return got, order
			}
			after = Bound{Set: true, Value: end.Last.Value}
		}
	}
	for _, chunk := range []int{1, 2, 7, 1000} {
		t.Run(fmt.Sprintf("chunk%d", chunk), func(t *testing.T) {
			got, order := sweepAll(t, Sweep{Table: "j", Index: "ix_biz", KeyCol: "biz_id"}, chunk, Bound{})
			if len(got) != len(want) {
				t.Errorf("%d keys, want %d", len(got), len(want))
			}
			for k, n := range want {
				if k == "pay-x" {
					continue
				}
				if got[k] != n {
					t.Errorf("%q: %d rows, want %d", k, got[k], n)
				}
			}
			// The four spellings are one key of four rows (pÁy-x folds to pay-x).
			var x int64
			for k, n := range got {
				if strings.HasPrefix(k, "p") && strings.HasSuffix(k, "y-x") || k == "pay-x" || k == "páy-x" {
					x += n
				}
			}
			if x != 4 {
				t.Errorf("pay-x spellings: %d rows, want 4 in one key", x)
			}
			var sorted []string
			rows, err := db.SQL.Query("SELECT biz_id FROM j GROUP BY biz_id ORDER BY biz_id")
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var k string
				rows.Scan(&k)
				sorted = append(sorted, k)
			}
			rows.Close()
			if !slices.Equal(order, sorted) {
				t.Errorf("order differs from the server's GROUP BY order")
			}
		})
	}
	// SweepMulti: the keys of more than one row, each once, whatever the
	// page (a page of 1 entry still holds all of its key's rows), the
	// spellings of pay-x one key; the rows counted are the table's.
	multi := func(t *testing.T, s Sweep, n int) ([]string, int64) {
		t.Helper()
		var hits []string
		var rows int64
		var after Bound
		for pages := 0; ; pages++ {
			if pages > 1000 {
				t.Fatal("the sweep does not end")
			}
			h, end, err := r.SweepMulti(ctx, s, after, n)
			if err != nil {
				t.Fatal(err)
			}
			hits = append(hits, h...)
			rows += end.Rows
			if end.Keys < n {
				return hits, rows
			}
			after = Bound{Set: true, Value: end.Last.Value}
		}
	}
	db.Exec(t, "INSERT INTO j (biz_id, n, created_at) VALUES ('PAY-0003', 0, ?), ('pay-0006 ', 0, ?)", at, at)
	total := int64(len(args)/3 + 2)
	for _, n := range []int{1, 2, 7, 1000} {
		t.Run(fmt.Sprintf("multi%d", n), func(t *testing.T) {
			hits, rows := multi(t, Sweep{Table: "j", Index: "ix_biz", KeyCol: "biz_id"}, n)
			got := folded(hits)
			if want := []string{"pay-0003", "pay-0006", "pay-x"}; !slices.Equal(got, want) {
				t.Errorf("keys of more than one row %q (as stored %q), want %q", got, hits, want)
			}
			// A full page counts its n entries, not the rest of its last
			// key's rows: at most a few short; the last page counts exactly.
			if rows > total || rows < total-5 || n == 1000 && rows != total {
				t.Errorf("%d rows counted, want about %d", rows, total)
			}
		})
	}
	t.Run("multi shards", func(t *testing.T) {
		total := 0
		for shard := range 3 {
			hits, _ := multi(t, Sweep{Table: "j", Index: "ix_biz", KeyCol: "biz_id", Shard: shard, Shards: 3}, 5)
			total += len(hits)
		}
		if total != 3 {
			t.Errorf("shards found %d keys of more than one row, want 3", total)
		}
	})
	// SweepBounds + SweepRange: pages between sampled keys find the same
	// keys of more than one row, each once, and count every entry but
	// those of one-entry pages; a key that is not an integer gives no
	// bounds.
	t.Run("ranges by sampled bounds", func(t *testing.T) {
		s := Sweep{Table: "j", Index: "ix_biz", KeyCol: "biz_id"}
		for _, n := range []int{1, 2, 9, 60, 5000} {
			bounds, err := r.SweepBounds(ctx, s, "id", n)
			if err != nil {
				t.Fatal(err)
			}
			if n > 1 && (len(bounds) == 0 || len(bounds) > n) {
				t.Fatalf("%d samples asked, %d bounds", n, len(bounds))
			}
			var hits []string
			var rows int64
			var after Bound
			for page := 0; page <= len(bounds); page++ {
				var upTo Bound
				if page < len(bounds) {
					upTo = Bound{Set: true, Value: bounds[page].Value}
				}
				h, end, err := r.SweepRange(ctx, s, after, upTo)
				if err != nil {
					t.Fatal(err)
				}
				hits = append(hits, h...)
				rows += end.Rows
				if upTo.Set {
					after = upTo
				}
			}
			got := folded(hits)
			if want := []string{"pay-0003", "pay-0006", "pay-x"}; !slices.Equal(got, want) {
				t.Errorf("%d samples: keys of more than one row %q, want %q", n, got, want)
			}
			if rows > total || rows < total-int64(len(bounds))-1 {
				t.Errorf("%d samples: %d rows counted, want %d less at most one a page", n, rows, total)
			}
		}
		if b, err := r.SweepBounds(ctx, s, "biz_id", 5); err != nil || b != nil {
			t.Errorf("bounds by a text key: %q, %v; want none", b, err)
		}
	})
	// Lo and Hi limit a sweep to a key range, inclusive, under the
	// collation: the bound 'PAY-0006' holds 'pay-0006 ', 'pay-x' every
	// spelling of pay-x; pay-0003 lies below.
	t.Run("multi within [Lo, Hi]", func(t *testing.T) {
		for _, n := range []int{1, 3, 1000} {
			hits, _ := multi(t, Sweep{Table: "j", Index: "ix_biz", KeyCol: "biz_id", Lo: Bound{Set: true, Value: "PAY-0006"}, Hi: Bound{Set: true, Value: "pay-x"}}, n)
			got := folded(hits)
			if want := []string{"pay-0006", "pay-x"}; !slices.Equal(got, want) {
				t.Errorf("page %d: keys of more than one row in [PAY-0006, pay-x] %q, want %q", n, got, want)
			}
		}
	})
	// WindowKeys: the least and greatest key of a time range, as the
	// collation orders them; none in an empty range. KeysExtent orders
	// stored keys alike.
	t.Run("window keys", func(t *testing.T) {
		lo, hi, rows, err := r.WindowKeys(ctx, "j", "ix_created", "biz_id", "created_at", at, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		var wlo, whi string
		if err := db.SQL.QueryRow("SELECT MIN(biz_id), MAX(biz_id) FROM j").Scan(&wlo, &whi); err != nil {
			t.Fatal(err)
		}
		if lo.Key != wlo || hi.Key != whi || rows != total || !strings.HasPrefix(hi.Key, "工单-") {
			t.Errorf("window keys [%q, %q] of %d rows, want [%q, %q] of %d", lo.Key, hi.Key, rows, wlo, whi, total)
		}
		for _, w := range [][2]time.Time{{at.Add(time.Second), {}}, {at.Add(-time.Hour), at}} {
			if _, _, rows, err := r.WindowKeys(ctx, "j", "ix_created", "biz_id", "created_at", w[0], w[1]); err != nil || rows != 0 {
				t.Errorf("window [%v, %v): %d rows, %v; want none", w[0], w[1], rows, err)
			}
		}
		lo, hi, err = r.KeysExtent(ctx, "j", "ix_biz", "biz_id", []KeyCount{{Value: "q'\"\\-0002"}, {Value: "pay-0006 "}, {Value: "PAY-X"}})
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimRight(strings.ToLower(lo.Key), " ") != "pay-0006" || hi.Key != `q'"\-0002` {
			t.Errorf("extent [%q, %q], want [pay-0006, q'\"\\-0002]", lo.Key, hi.Key)
		}
	})
	db.Exec(t, "DELETE FROM j WHERE n = 0 AND biz_id IN ('PAY-0003', 'pay-0006 ')")
	t.Run("upTo", func(t *testing.T) {
		got, _ := sweepAll(t, Sweep{Table: "j", Index: "ix_biz", KeyCol: "biz_id"}, 5, Bound{Set: true, Value: "PAY-0100"})
		for k := range got {
			if k > "pay-0100" && !strings.HasPrefix(k, "pay-0") {
				t.Errorf("%q past the upper bound", k)
			}
		}
		if _, ok := got["pay-0099"]; !ok {
			t.Error("pay-0099 missing below the bound")
		}
		if _, ok := got["pay-0102"]; ok {
			t.Error("pay-0102 above the bound")
		}
	})
	t.Run("integers", func(t *testing.T) {
		s := Sweep{Table: "j", Index: "ix_n", KeyCol: "n"}
		got, order := sweepAll(t, s, 3, Bound{})
		if len(got) != 50 {
			t.Errorf("%d integer keys, want 50", len(got))
		}
		if order[0] != "0" || order[len(order)-1] != "49" {
			t.Errorf("integer keys out of numeric order: %v", order)
		}
		end, err := r.SweepPage(ctx, s, Bound{}, Bound{}, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := end.Last.Value.(int64); !ok || v != 9 {
			t.Errorf("last value %#v, want int64 9", end.Last.Value)
		}
	})
	// Each key is in exactly one shard, its spellings included.
	t.Run("shards", func(t *testing.T) {
		total := 0
		for shard := range 3 {
			got, _ := sweepAll(t, Sweep{Table: "j", Index: "ix_biz", KeyCol: "biz_id", Shard: shard, Shards: 3}, 4, Bound{})
			total += len(got)
		}
		if total != len(want) {
			t.Errorf("shards hold %d keys, want %d", total, len(want))
		}
	})
	t.Run("KeysSince", func(t *testing.T) {
		db.Exec(t, "UPDATE j SET created_at = ? WHERE biz_id = 'pay-0003'", at.Add(time.Hour))
		in, err := r.KeysSince(ctx, "j", "biz_id", "created_at", at.Add(time.Minute), []string{"pay-0003", "pay-0006", "nope"})
		if err != nil {
			t.Fatal(err)
		}
		if !in["pay-0003"] || in["pay-0006"] || len(in) != 1 {
			t.Errorf("KeysSince = %v, want only pay-0003", in)
		}
	})
	t.Run("RangeRows", func(t *testing.T) {
		n, ok, err := r.RangeRows(ctx, "j", "ix_created", "created_at", at.Add(-time.Hour))
		if err != nil || !ok || n < 100 {
			t.Errorf("RangeRows = %d, %v, %v; want about 304 rows", n, ok, err)
		}
		if _, _, err := r.RangeRows(ctx, "j", "ix created", "created_at", at); err == nil {
			t.Error("RangeRows on a bad index name: no error")
		}
	})
	ti, err := r.TableInfo(ctx, "j")
	if err != nil {
		t.Fatal(err)
	}
	if c := ti.Collation("BIZ_ID"); c != "utf8mb4_general_ci" {
		t.Errorf("collation of biz_id = %q", c)
	}
	if c := ti.Collation("n"); c != "" {
		t.Errorf("collation of n = %q, want none", c)
	}
}

// folded returns keys as utf8mb4_general_ci compares them (case, the
// accent on Á, trailing spaces), sorted.
func folded(keys []string) []string {
	var out []string
	for _, k := range keys {
		out = append(out, strings.ToLower(strings.TrimRight(strings.ReplaceAll(k, "Á", "a"), " ")))
	}
	slices.Sort(out)
	return out
}

// TestSweepBoundsExtremeKeys: primary keys at the ends of BIGINT, or past
// it (UNSIGNED), sample without overflow or give no bounds. Four samples
// of [-2^63, 2^63-1] land on -2^62, 0 and 2^62: only 0 is a row ('c'); in
// int64 arithmetic hi - lo wraps to -1 and every sample is the first row.
func TestSweepBoundsExtremeKeys(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	db.Exec(t, `CREATE TABLE s (id BIGINT PRIMARY KEY, biz_id VARCHAR(20) NOT NULL, KEY ix_biz (biz_id))`)
	db.Exec(t, `INSERT INTO s VALUES (-9223372036854775808, 'a'), (-5, 'b'), (0, 'c'), (7, 'd'), (9223372036854775807, 'e')`)
	db.Exec(t, `CREATE TABLE u (id BIGINT UNSIGNED PRIMARY KEY, biz_id VARCHAR(20) NOT NULL, KEY ix_biz (biz_id))`)
	db.Exec(t, `INSERT INTO u VALUES (1, 'a'), (18446744073709551615, 'b')`)
	r, err := Open(db.DSN, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	for _, n := range []int{2, 4, 100} {
		b, err := r.SweepBounds(ctx, Sweep{Table: "s", Index: "ix_biz", KeyCol: "biz_id"}, "id", n)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range b {
			if !strings.Contains("abcde", k.Key) || i > 0 && b[i-1].Key >= k.Key {
				t.Errorf("%d samples: bounds %q not stored keys in order", n, b)
			}
		}
		if n == 4 && (len(b) != 1 || b[0].Key != "c") {
			t.Errorf("4 samples: bounds %q, want the row at id 0 (c)", b)
		}
	}
	if b, err := r.SweepBounds(ctx, Sweep{Table: "u", Index: "ix_biz", KeyCol: "biz_id"}, "id", 4); err != nil || b != nil {
		t.Errorf("UNSIGNED past BIGINT: bounds %q, %v; want none", b, err)
	}
}
