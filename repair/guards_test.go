package repair

import "testing"

func TestSameValueIsExact(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, c := range []struct {
		a, b *string
		want bool
	}{
		{nil, nil, true},
		{nil, str("0"), false},
		{str(""), nil, false},
		{str("30.00"), str("30.00"), true},
		{str("30.00"), str("30.0"), true}, // a DECIMAL read with another scale
		{str("30"), str("30.000"), true},
		{str("-0.50"), str("-.5"), true},
		{str("+1"), str("1"), true},
		{str("1e3"), str("1000"), true},
		{str("30.00"), str("30.01"), false},
		// BIGINT above 2^53: equal as float64, not equal.
		{str("9007199254740993"), str("9007199254740992"), false},
		{str("18446744073709551615"), str("18446744073709551614"), false},
		// DECIMAL(65,30) that differ in the 30th decimal.
		{str("12345678901234567890123456789012345.000000000000000000000000000001"),
			str("12345678901234567890123456789012345.000000000000000000000000000002"), false},
		{str("0.100000000000000000000000000001"), str("0.1"), false},
		// Not decimals: only the same text is the same.
		{str("abc"), str("ABC"), false},
		{str("0x10"), str("16"), false},
		{str("1/2"), str("0.5"), false},
		{str("1_000"), str("1000"), false},
		{str("NaN"), str("NaN"), true},
		{str("Inf"), str("+Inf"), false},
		{str("2026-12-01 08:01:48"), str("2026-12-01 08:01:48.000"), false},
	} {
		if got := sameValue(c.a, c.b); got != c.want {
			t.Errorf("sameValue(%s, %s) = %v, want %v", strOrNull(c.a), strOrNull(c.b), got, c.want)
		}
		if got := sameValue(c.b, c.a); got != c.want {
			t.Errorf("sameValue(%s, %s) = %v, want %v (not symmetric)", strOrNull(c.b), strOrNull(c.a), got, c.want)
		}
	}
}
