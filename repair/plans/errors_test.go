package plans

import (
	"strings"
	"testing"
)

func TestRefusedErrorText(t *testing.T) {
	g := &Guard{Check: CheckStateStatus, Op: "==", Value: "DONE\x1b[2J"}
	for _, c := range []struct {
		name string
		err  *RefusedError
		want string
	}{
		{"guard failed", &RefusedError{Code: CodeGuardFailed, Action: 2, Guard: g, Got: "X\rY"}, `refused at action 2: guard state.status == 'DONE\x1b[2J' failed (read X\rY)`},
		{"guard failed without a guard", &RefusedError{Code: CodeGuardFailed, Action: 1, Detail: "reverse statement 1 changed no row"}, "refused at action 1: reverse statement 1 changed no row"},
		{"tampered detail from the file", &RefusedError{Code: CodeTampered, Detail: "verdict 0\b"}, `refused: tampered plan: verdict 0\b`},
		{"stale diff from the database", &RefusedError{Code: CodeStale, Diff: []Change{{Field: "state.status", From: "A", To: "B\x07"}}}, `state.status: A → B\a`},
		{"plain", &RefusedError{Code: CodeNoSafePlan, Detail: `plan with --attest "x"`}, `refused: plan with --attest "x"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.err.Error()
			if !strings.Contains(got, c.want) {
				t.Fatalf("%q lacks %q", got, c.want)
			}
			for _, r := range got {
				if r < 0x20 && r != '\n' {
					t.Fatalf("control character %U in %q", r, got)
				}
			}
		})
	}
}

// TestShown: the rule of human output. A printable value is itself; one
// with a control character, a separator, a bidi override, a C1 control or
// an invalid byte is a quoted Go string, still recognisable; so is one that
// starts with a double quote, so that quotes always mean escapes.
func TestShown(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"PAY-1", "PAY-1"},
		{"a b 中文 ü €", "a b 中文 ü €"},
		{"", ""},
		{"it's", "it's"},
		{"PAY\x1b[2J", `"PAY\x1b[2J"`},
		{"DONE\rOK", `"DONE\rOK"`},
		{"c-1\a", `"c-1\a"`},
		{"R\t1", `"R\t1"`},
		{"a\nb", `"a\nb"`},
		{"m\u2028x", `"m\u2028x"`},
		{"k\xffk", `"k\xffk"`},
		{"txt\u202eevil", `"txt\u202eevil"`},
		{"\u009b31m", `"\u009b31m"`},
		{"del\x7f", `"del\x7f"`},
		{`"quoted"`, `"\"quoted\""`},
		{`say "hi"`, `say "hi"`},
		{"\ufffd", "\ufffd"},
	} {
		if got := Shown(c.in); got != c.want {
			t.Errorf("Shown(%q) = %s, want %s", c.in, got, c.want)
		}
	}
	// Printable escapes the same runes without the quotes.
	if got := Printable("PAY\x1b[2J"); got != `PAY\x1b[2J` {
		t.Errorf("Printable: %s", got)
	}
}
