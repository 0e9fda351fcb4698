package sources

import (
	"strings"
	"testing"
	"time"
)

func TestDecimalSub(t *testing.T) {
	cases := []struct{ a, b, want, err string }{
		{"70.00", "100.00", "-30.00", ""},
		{"100", "70.5", "29.5", ""},
		{"12345678901234567890.1234567891", "12345678901234567890.1234567892", "-0.0000000001", ""},
		{"0.10", "0.1", "0.00", ""},
		{"x", "1", "", `"x" is not a decimal`},
	}
	for _, c := range cases {
		t.Run(c.a+"-"+c.b, func(t *testing.T) {
			got, err := DecimalSub(c.a, c.b)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("DecimalSub = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestAttributeChanges(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ch := func(gtid string, before, after string, tx ...string) BinlogChange {
		return BinlogChange{GTID: gtid, File: "bin.000001", Pos: 120, At: at, Key: int64(1001), Before: before, After: after, TxKeys: tx}
	}
	cases := []struct {
		name    string
		changes []BinlogChange
		delta   string
		txSet   bool
		want    []string // id:attribution
	}{
		{"double debit, no transaction rows", []BinlogChange{ch("0-1-5", "100.00", "70.00"), ch("0-1-9", "70.00", "40.00")}, "-30", true,
			[]string{"0-1-5#0:message", "0-1-9#0:message"}},
		{"tied by the transaction, then by the message", []BinlogChange{ch("0-1-5", "100.00", "70.00", "PAY-1"), ch("0-1-9", "70.00", "40.00")}, "-30.00", true,
			[]string{"0-1-5#0:transaction", "0-1-9#0:message"}},
		{"same amount, tied to other operations", []BinlogChange{ch("0-1-4", "130.00", "100.00", "PAY-0"), ch("0-1-5", "100.00", "70.00", "PAY-1"), ch("0-1-6", "70.00", "40.00", "PAY-2", "PAY-3")}, "-30.00", true,
			[]string{"0-1-5#0:transaction"}},
		{"without binlog.transaction the rows do not tie", []BinlogChange{ch("0-1-4", "130.00", "100.00", "PAY-0")}, "-30.00", false,
			[]string{"0-1-4#0:message"}},
		{"a reversal is not a debit", []BinlogChange{ch("0-1-5", "100.00", "70.00"), ch("0-1-7", "70.00", "100.00")}, "-30.00", true,
			[]string{"0-1-5#0:message"}},
		{"another amount", []BinlogChange{ch("0-1-5", "100.00", "69.99")}, "-30.00", true, nil},
		{"no GTID: file:pos", []BinlogChange{ch("", "100.00", "70.00")}, "-30.00", true, []string{"bin.000001:120#0:message"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rows, err := AttributeChanges(c.changes, "PAY-1", c.delta, c.txSet)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rows {
				if !r.IsBinlogChange() {
					t.Fatalf("row columns %v", r.Columns)
				}
				id, _ := r.Get("id")
				how, _ := r.Get("attribution")
				got = append(got, id.(string)+":"+how.(string))
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
	if _, err := AttributeChanges(nil, "PAY-1", "thirty", true); err == nil {
		t.Fatal("a delta that is not a number must be an error")
	}
}

func TestBinlogLockedRows(t *testing.T) {
	rows, _ := AttributeChanges([]BinlogChange{{GTID: "0-1-5", Key: int64(7), Before: "1.00", After: "0.50"}}, "P", "-0.5", false)
	lr := BinlogLockedRows(rows)
	if len(lr.Values) != 1 || len(lr.Decimal) != len(lr.Columns) {
		t.Fatalf("%+v", lr)
	}
	for j, c := range lr.Columns {
		if want := c == "delta" || c == "before" || c == "after"; lr.Decimal[j] != want {
			t.Errorf("column %s decimal %v", c, lr.Decimal[j])
		}
	}
}

func TestRepeatedChanges(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ch := func(sec int, key int64, before, after string, tx ...string) BinlogChange {
		return BinlogChange{GTID: "0-1-1", At: at.Add(time.Duration(sec) * time.Second), Key: key, Before: before, After: after, TxKeys: tx}
	}
	cases := []struct {
		name    string
		changes []BinlogChange
		want    []string
	}{
		{"a debit tied to PAY-1, then the same debit untied", []BinlogChange{ch(0, 1, "100.00", "70.00", "PAY-1"), ch(12, 1, "70.00", "40.00")}, []string{"PAY-1"}},
		{"the same delta tied to another operation: no suspect", []BinlogChange{ch(0, 1, "100.00", "70.00", "PAY-1"), ch(5, 1, "70.00", "40.00", "PAY-2")}, nil},
		{"another row", []BinlogChange{ch(0, 1, "100.00", "70.00", "PAY-1"), ch(5, 2, "70.00", "40.00")}, nil},
		{"another delta", []BinlogChange{ch(0, 1, "100.00", "70.00", "PAY-1"), ch(5, 1, "70.00", "50.00")}, nil},
		{"after the window", []BinlogChange{ch(0, 1, "100.00", "70.00", "PAY-1"), ch(700, 1, "70.00", "40.00")}, nil},
		{"both tied to one operation", []BinlogChange{ch(0, 1, "100.0", "70.0", "PAY-1"), ch(3, 1, "70.00", "40.00", "PAY-1")}, []string{"PAY-1"}},
		{"untied changes only: no operation to name", []BinlogChange{ch(0, 1, "100.00", "70.00"), ch(3, 1, "70.00", "40.00")}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := RepeatedChanges(c.changes, 10*time.Minute)
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}
