package sources

import "testing"

func TestStoredBizID(t *testing.T) {
	for _, c := range []struct {
		name  string
		typed string
		db    DBEvidence
		want  string
	}{
		{"state row key", "pay-1", DBEvidence{State: StateRow{Found: true, Key: "PAY-1"}}, "PAY-1"},
		{"state row wins over records", "pay-1", DBEvidence{State: StateRow{Found: true, Key: "PAY-1"}, Idempotency: []IdempotencyRow{{BizID: "Pay-1"}}}, "PAY-1"},
		{"no row: as typed", "pay-1", DBEvidence{}, "pay-1"},
		{"idempotency record", "8821 ", DBEvidence{Idempotency: []IdempotencyRow{{Key: "m-1", BizID: "8821"}, {Key: "m-2", BizID: "8821"}}}, "8821"},
		{"records that disagree", "x", DBEvidence{Idempotency: []IdempotencyRow{{BizID: "X"}, {BizID: "x"}}}, "x"},
		{"record without biz_id", "a", DBEvidence{Idempotency: []IdempotencyRow{{Key: "m"}}}, "a"},
		{"empty state key", "a", DBEvidence{State: StateRow{Found: true}}, "a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := StoredBizID(c.typed, c.db); got != c.want {
				t.Fatalf("StoredBizID(%q) = %q, want %q", c.typed, got, c.want)
			}
		})
	}
}
