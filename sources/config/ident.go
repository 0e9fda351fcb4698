package config

import (
	"fmt"
	"strings"
)

// ValidIdent reports whether s is a valid identifier (docs/config.md): a name
// matching ^[A-Za-z_][A-Za-z0-9_$]*$, optionally qualified as schema.table.
func ValidIdent(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) > 2 {
		return false
	}
	for _, p := range parts {
		if len(p) > 64 || !validIdentPart(p) {
			return false
		}
	}
	return true
}

// QuoteIdent backquotes a validated identifier (`schema`.`table`). It panics
// on an identifier that did not pass ValidIdent: every identifier reaches SQL
// only after Load validated it, so this is a programming error.
func QuoteIdent(s string) string {
	if !ValidIdent(s) {
		panic(fmt.Sprintf("config: QuoteIdent on unvalidated identifier %q", s))
	}
	parts := strings.Split(s, ".")
	for i, p := range parts {
		parts[i] = "`" + p + "`"
	}
	return strings.Join(parts, ".")
}
