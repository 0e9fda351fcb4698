package inspect

import "testing"

// TestShellQuoteIDArg: a value is quoted for a POSIX shell when it holds
// anything but safe characters, a ' as '\”, and one that starts with "-"
// too (IDArg puts "--" before an id). What NEXT says is the planner's
// (repair/plans TestNextSteps) and cmd's lines (TestNextLines).
func TestShellQuoteIDArg(t *testing.T) {
	for in, want := range map[string]string{
		"it's a; test": `'it'\''s a; test'`,
		"PAY-1":        "PAY-1",
		"-o":           "'-o'",
		"":             "''",
		"a$(id)":       "'a$(id)'",
	} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", in, got, want)
		}
	}
	if got := IDArg("-x"); got != " -- '-x'" {
		t.Errorf("IDArg: %q", got)
	}
}
