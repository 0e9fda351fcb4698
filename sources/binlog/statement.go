package binlog

import (
	"slices"
	"strings"
)

// A statement-format event (binlog_format STATEMENT or MIXED, for the
// server or for one session) holds SQL text, not rows. opctl does not
// execute or fully parse it: it only asks whether the statement changes
// rows and names a table, erring towards yes (a name in a comment that
// the server executes, a double-quoted name, a column that shares the
// table's name all count), since a statement it overlooked would hide a
// change.

// dmlVerbs are the statements that change rows.
var dmlVerbs = [...]string{"UPDATE", "INSERT", "REPLACE", "DELETE", "LOAD"}

// isDML reports whether q is a statement that changes rows: its first
// word (after comments and parentheses; WITH for a CTE) is one of
// dmlVerbs. A statement that cannot be told apart is DML.
func isDML(q string) bool {
	toks := sqlTokens(q, 64)
	for _, t := range toks {
		if t.kind != tokWord {
			continue
		}
		w := strings.ToUpper(t.text)
		switch {
		case slices.Contains(dmlVerbs[:], w):
			return true
		case w == "WITH":
			// WITH ... UPDATE/DELETE (MySQL 8): look further.
			for _, u := range toks {
				if u.kind == tokWord && slices.Contains(dmlVerbs[:], strings.ToUpper(u.text)) {
					return true
				}
			}
			return false
		}
		return false
	}
	return false
}

// namesTable reports whether q names table schema.table: qualified with
// that schema, or unqualified in a statement whose default schema
// (defSchema, the event's) is that schema (where an unqualified word that
// spells the table's name is taken for it, whatever else it is). fold compares names
// case-insensitively (lower_case_table_names 1 or 2).
func namesTable(q, defSchema, schema, table string, fold bool) bool {
	same := func(a, b string) bool {
		if fold {
			return strings.EqualFold(a, b)
		}
		return a == b
	}
	toks := sqlTokens(q, -1)
	for i, t := range toks {
		if !t.ident() || !same(t.text, table) {
			continue
		}
		if i >= 2 && toks[i-1].kind == tokDot && toks[i-2].ident() {
			// qualifier.table: ours when the qualifier is our schema;
			// another schema's table otherwise (or, after an alias, a
			// column that shares the table's name).
			if same(toks[i-2].text, schema) {
				return true
			}
			continue
		}
		if same(defSchema, schema) {
			return true
		}
	}
	return false
}

type tokKind uint8

const (
	tokWord   tokKind = iota // a bare word (keyword or identifier)
	tokQuoted                // a `quoted` or "quoted" identifier
	tokDot
	tokOther
)

type token struct {
	kind tokKind
	text string
}

func (t token) ident() bool { return t.kind == tokWord || t.kind == tokQuoted }

// sqlTokens splits q into words, quoted identifiers, dots and other
// symbols, skipping string literals and comments (but not the executable
// /*! ... */ and /*M! ... */ comments, whose text the server runs). At
// most max tokens are returned (max < 0: all).
func sqlTokens(q string, max int) []token {
	var out []token
	add := func(k tokKind, s string) bool {
		out = append(out, token{k, s})
		return max < 0 || len(out) < max
	}
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '#' || (c == '-' && strings.HasPrefix(q[i:], "--") && (i+2 == len(q) || isSpace(q[i+2]))):
			for i < len(q) && q[i] != '\n' {
				i++
			}
		case c == '/' && strings.HasPrefix(q[i:], "/*"):
			if strings.HasPrefix(q[i:], "/*!") || strings.HasPrefix(q[i:], "/*M!") {
				// Executable comment: skip the marker and version, keep
				// the text; its closing */ is skipped below.
				i += 3
				if q[i-1] == 'M' {
					i++
				}
				for i < len(q) && q[i] >= '0' && q[i] <= '9' {
					i++
				}
				continue
			}
			end := strings.Index(q[i+2:], "*/")
			if end < 0 {
				return out
			}
			i += end + 4
		case c == '*' && strings.HasPrefix(q[i:], "*/"):
			i += 2
		case c == '\'':
			i = skipString(q, i, '\'')
		case c == '"' || c == '`':
			j := i + 1
			var b strings.Builder
			for j < len(q) {
				if q[j] == c {
					if j+1 < len(q) && q[j+1] == c {
						b.WriteByte(c)
						j += 2
						continue
					}
					break
				}
				if c == '"' && q[j] == '\\' && j+1 < len(q) {
					j++
				}
				b.WriteByte(q[j])
				j++
			}
			if !add(tokQuoted, b.String()) {
				return out
			}
			i = j + 1
		case c == '.':
			if !add(tokDot, ".") {
				return out
			}
			i++
		case isWordByte(c):
			j := i
			for j < len(q) && isWordByte(q[j]) {
				j++
			}
			if !add(tokWord, q[i:j]) {
				return out
			}
			i = j
		default:
			if !add(tokOther, q[i:i+1]) {
				return out
			}
			i++
		}
	}
	return out
}

// skipString returns the index after the string literal starting at i.
func skipString(q string, i int, quote byte) int {
	j := i + 1
	for j < len(q) {
		switch q[j] {
		case '\\':
			j += 2
			continue
		case quote:
			if j+1 < len(q) && q[j+1] == quote {
				j += 2
				continue
			}
			return j + 1
		}
		j++
	}
	return len(q)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// isWordByte: identifier characters, any byte of a multibyte UTF-8
// character included.
func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func sortStrings(s []string) { slices.Sort(s) }
