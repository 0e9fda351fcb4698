package config

import (
	"fmt"
	"strings"
)

// sqlPart is a piece of an SQL snippet: code, or a quoted string, quoted
// identifier or comment (kept as written).
type sqlPart struct {
	text string
	code bool
}

// splitSQL cuts q into code and non-code parts by MySQL's lexical rules:
// '...' and "..." strings (backslash escapes, doubled quotes), `...`
// identifiers (doubled backquotes), -- comments (followed by a space, a
// control character or the end), # comments and /* */ comments. An
// unterminated quote or comment is an error. It is the one SQL lexer of
// the config checks: placeholders are counted, and :names bound, only in
// code parts.
func splitSQL(q string) ([]sqlPart, error) {
	var parts []sqlPart
	start := 0
	cut := func(i, j int) {
		if start < i {
			parts = append(parts, sqlPart{text: q[start:i], code: true})
		}
		parts = append(parts, sqlPart{text: q[i:j]})
		start = j
	}
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for ; j < len(q); j++ {
				if q[j] == '\\' && c != '`' {
					j++
					continue
				}
				if q[j] == c {
					if j+1 < len(q) && q[j+1] == c {
						j++ // a doubled quote stands for itself
						continue
					}
					break
				}
			}
			if j >= len(q) {
				return nil, fmt.Errorf("has an unterminated %c...%c quote", c, c)
			}
			cut(i, j+1)
			i = j
		case c == '#' || c == '-' && strings.HasPrefix(q[i:], "--") && (i+2 == len(q) || q[i+2] <= ' '):
			j := len(q)
			if k := strings.IndexByte(q[i:], '\n'); k >= 0 {
				j = i + k
			}
			cut(i, j)
			i = j - 1
		case c == '/' && strings.HasPrefix(q[i:], "/*"):
			k := strings.Index(q[i+2:], "*/")
			if k < 0 {
				return nil, fmt.Errorf("has an unterminated /* comment")
			}
			cut(i, i+k+4)
			i += k + 3
		}
	}
	if start < len(q) {
		parts = append(parts, sqlPart{text: q[start:], code: true})
	}
	return parts, nil
}

// countPlaceholders counts the `?` of q outside quoted strings, quoted
// identifiers and comments.
func countPlaceholders(q string) (int, error) {
	parts, err := splitSQL(q)
	n := 0
	for _, p := range parts {
		if p.code {
			n += strings.Count(p.text, "?")
		}
	}
	return n, err
}

// WithoutComments returns q with each comment replaced by a space; quoted
// strings and identifiers are kept as written. It is for checks of what the
// server reads, such as whether a query already ends in FOR UPDATE.
func WithoutComments(q string) (string, error) {
	parts, err := splitSQL(q)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range parts {
		switch {
		case p.code:
			b.WriteString(p.text)
		case isComment(p.text):
			b.WriteByte(' ')
		default:
			b.WriteString(p.text)
		}
	}
	return b.String(), nil
}

func isComment(part string) bool {
	return strings.HasPrefix(part, "#") || strings.HasPrefix(part, "--") || strings.HasPrefix(part, "/*")
}

// NamedParams rewrites the :name parameters of a reverse statement as ?
// and returns the names in order. Quoted strings, quoted identifiers,
// comments, :: and := are left alone; a ? placeholder or an unterminated
// quote or comment is an error.
func NamedParams(stmt string) (string, []string, error) {
	return BindNamed(stmt, func(string) string { return "?" })
}

// BindNamed is NamedParams with the placeholder text of each name chosen by
// placeholder (the MySQL driver binds a DECIMAL as CAST(? AS DECIMAL(65,30))
// so that arithmetic on it stays exact).
func BindNamed(stmt string, placeholder func(name string) string) (string, []string, error) {
	parts, err := splitSQL(stmt)
	if err != nil {
		return "", nil, err
	}
	var out strings.Builder
	var names []string
	for _, p := range parts {
		if !p.code {
			out.WriteString(p.text)
			continue
		}
		s := p.text
		for i := 0; i < len(s); i++ {
			c := s[i]
			switch {
			case c == ':' && i+1 < len(s) && (s[i+1] == ':' || s[i+1] == '='):
				out.WriteString(s[i : i+2])
				i++
			case c == ':' && i+1 < len(s) && isIdentStart(s[i+1]) && (i == 0 || !isWordByte(s[i-1])):
				j := i + 1
				for j < len(s) && isWordByte(s[j]) {
					j++
				}
				name := s[i+1 : j]
				names = append(names, name)
				out.WriteString(placeholder(name))
				i = j - 1
			case c == '?':
				return "", nil, fmt.Errorf("has a ? placeholder: reverse statements bind :column names only")
			default:
				out.WriteByte(c)
			}
		}
	}
	return out.String(), names, nil
}
