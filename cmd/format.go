package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/cmd/ui"
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

// IsJSON reports whether f is a JSON format (json, jsonl): the views of
// every command are chosen on it once.
func (f Format) IsJSON() bool { return f == FormatJSON || f == FormatJSONL }

// tableFor is how a human view's tables and notes fit where stdout goes:
// the terminal's width on a terminal (-o wide: every value whole),
// tab-separated when piped (docs/README.md).
func tableFor(ios *iostreams.IOStreams, f Format) ui.TableOptions {
	o := ui.TableOptions{TTY: ios.IsStdoutTTY(), Wide: f == FormatWide}
	if o.TTY {
		o.Width = ios.TerminalWidth()
	}
	return o
}

// encodeList writes a list as -o json (one array) or -o jsonl (one object
// a line).
func encodeList[T any](w io.Writer, f Format, list []T) error {
	enc := jsonEncoder(w, f)
	if f != FormatJSONL {
		if list == nil {
			list = []T{}
		}
		return enc.Encode(list)
	}
	for _, v := range list {
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	return nil
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
