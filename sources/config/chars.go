package config

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The character classes of names in a configuration, checked by hand: a
// regexp compiled at package init would cost every opctl command its
// start-up time (docs/architecture.md: no init-time work).

func isASCIILetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }
func isDigit(b byte) bool       { return b >= '0' && b <= '9' }

// isIdentStart: [A-Za-z_], the first byte of an identifier or of a :name.
func isIdentStart(b byte) bool { return isASCIILetter(b) || b == '_' }

// isWordByte: [A-Za-z0-9_$], a byte of an identifier after its first.
func isWordByte(b byte) bool { return isIdentStart(b) || isDigit(b) || b == '$' }

// every reports whether s is not empty and every byte of it is ok.
func every(s string, ok func(byte) bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

// validIdentPart: ^[A-Za-z_][A-Za-z0-9_$]*$
func validIdentPart(s string) bool {
	return s != "" && isIdentStart(s[0]) && every(s, isWordByte)
}

// validEnvName: ^[A-Za-z_][A-Za-z0-9_]*$
func validEnvName(s string) bool {
	return s != "" && isIdentStart(s[0]) && every(s, func(b byte) bool { return isWordByte(b) && b != '$' })
}

// validName (a pipeline or step name): ^[A-Za-z0-9_.-]+$
func validName(s string) bool {
	return every(s, func(b byte) bool { return isASCIILetter(b) || isDigit(b) || b == '_' || b == '.' || b == '-' })
}

// validTopic is Kafka's legal topic name: [A-Za-z0-9._-]{1,249}, not "."
// or "..".
func validTopic(t string) bool { return len(t) <= 249 && validName(t) && t != "." && t != ".." }

// validVersion (kafka.version): ^[0-9]+\.[0-9]+\.[0-9]+(\.[0-9]+)?$
func validVersion(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 3 && len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		if !every(p, isDigit) {
			return false
		}
	}
	return true
}

// printable returns s with each control character (C0, DEL and C1) and
// each byte of invalid UTF-8 escaped as Go writes it (\n, \x1b, \u0085), so
// that a message quoting the input cannot move a terminal's cursor or
// split one error into two lines.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsControl(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
