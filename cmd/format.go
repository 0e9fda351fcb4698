package cmd

import (
	"encoding/json"
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
// object per line, not indented).
func jsonEncoder(w io.Writer, f Format) *json.Encoder {
	enc := json.NewEncoder(w)
	if f != FormatJSONL {
		enc.SetIndent("", "  ")
	}
	return enc
}
