package ui

import (
	"strings"
	"testing"
)

// TestSafe: Safe is the rule of human output (plans.Shown): a value that
// starts with a double quote is quoted too, so that quotes always mean
// escapes.
func TestSafe(t *testing.T) {
	for in, want := range map[string]string{
		"PAY-1":                   "PAY-1",
		"PAY\x1b[2J":              `"PAY\x1b[2J"`,
		`"PAY\x1b[2J"`:            `"\"PAY\\x1b[2J\""`,
		"txt\u202eevil":           `"txt\u202eevil"`,
		"k\xffk":                  `"k\xffk"`,
		"settlement-event \u00e9": "settlement-event \u00e9",
	} {
		if got := Safe(in); got != want {
			t.Errorf("Safe(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestSafeLines: each line of a multi-line text by itself; the newlines
// stay.
func TestSafeLines(t *testing.T) {
	in := "stale plan: what it observed changed\n  state.status: A → B\x1b[2J\nmake a new plan"
	// The indentation stays outside the quotes: the line keeps its place
	// under the ones around it.
	want := "stale plan: what it observed changed\n  \"state.status: A → B\\x1b[2J\"\nmake a new plan"
	if got := SafeLines(in); got != want {
		t.Errorf("SafeLines:\n%s\nwant:\n%s", got, want)
	}
	if got := SafeLines("one line\r"); strings.ContainsRune(got, '\r') {
		t.Errorf("SafeLines kept a CR: %q", got)
	}
	// cobra's suggestions indent with a tab.
	if got := SafeLines("unknown command \"pla\"\n\nDid you mean this?\n\tplan\n\tx\ty\x1b"); got != "unknown command \"pla\"\n\nDid you mean this?\n\tplan\n\t\"x\\ty\\x1b\"" {
		t.Errorf("SafeLines: %q", got)
	}
}
