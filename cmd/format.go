package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// parseFormat checks an -o value against the formats a command takes
// (docs/README.md: table, json, jsonl; reconcile also prometheus); anything
// else is a usage error naming them.
func parseFormat(s string, allowed ...Format) (Format, error) {
	names := make([]string, len(allowed))
	for i, f := range allowed {
		if Format(s) == f {
			return f, nil
		}
		names[i] = string(f)
	}
	want := strings.Join(names, ", ")
	if n := len(names); n > 1 {
		want = strings.Join(names[:n-1], ", ") + " or " + names[n-1]
	}
	return "", usageErrorf("--output %q: want %s", s, want)
}

// jsonEncoder writes the JSON of -o json (indented) and -o jsonl (one
// object per line, not indented), through safeJSON: no value from a
// database or a file reaches a terminal as a command.
func jsonEncoder(w io.Writer, f Format) *json.Encoder {
	enc := json.NewEncoder(safeJSON{w})
	if f != FormatJSONL {
		enc.SetIndent("", "  ")
	}
	return enc
}

// safeJSON writes JSON with DEL and the C1 controls (U+0080-U+009F;
// U+009B is a CSI) escaped as \u007f, \u009b: the same values, nothing a
// terminal would take for a command (encoding/json escapes the C0 controls
// itself but leaves these raw). It relies on json.Encoder writing each value
// with one Write, so that a rune is never split between two.
type safeJSON struct{ w io.Writer }

func (s safeJSON) Write(p []byte) (int, error) {
	var b []byte
	last := 0
	for i := 0; i < len(p); i++ {
		var r rune
		switch {
		case p[i] == 0x7f:
			r = 0x7f
		case p[i] == 0xc2 && i+1 < len(p) && p[i+1] >= 0x80 && p[i+1] <= 0x9f:
			r = rune(p[i+1]) // U+0080-U+009F is 0xC2 0x80-0x9F in UTF-8
		default:
			continue
		}
		b = append(b, p[last:i]...)
		b = fmt.Appendf(b, `\u%04x`, r)
		if r != 0x7f {
			i++
		}
		last = i + 1
	}
	if b == nil {
		return s.w.Write(p)
	}
	if _, err := s.w.Write(append(b, p[last:]...)); err != nil {
		return 0, err
	}
	return len(p), nil
}
