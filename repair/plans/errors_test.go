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
