package cmd

import (
	"bytes"
	"strings"
	"testing"
)

// An unexpected panic is one line and exit 1, never a Go trace.
func TestGuardTurnsAPanicIntoOneLine(t *testing.T) {
	var errOut bytes.Buffer
	code := guard(&errOut, func() int { panic("runtime error: invalid memory address or nil pointer dereference") })
	out := errOut.String()
	if code != ExitError || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "opctl: internal error: runtime error") || strings.Contains(out, "goroutine") {
		t.Fatalf("exit %d, stderr %q", code, out)
	}
	if code := guard(&errOut, func() int { return 3 }); code != 3 {
		t.Fatalf("without a panic: exit %d", code)
	}
}
