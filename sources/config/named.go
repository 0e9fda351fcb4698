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

// sqlToken is one token of the code of an SQL snippet: a word (a keyword,
// an identifier or a number), a quoted string or identifier (text without
// its quotes), or one punctuation byte.
type sqlToken struct {
	text string
	kind sqlTokenKind
	pos  int // byte offset of the token in the snippet
}

type sqlTokenKind uint8

const (
	tokWord   sqlTokenKind = iota // [A-Za-z0-9_$] and non-ASCII bytes
	tokString                     // '...' or "..."
	tokIdent                      // `...`
	tokPunct                      // any other byte but space
)

// is reports whether t is the word w, in any case.
func (t sqlToken) is(w string) bool { return t.kind == tokWord && strings.EqualFold(t.text, w) }

// sqlTokens cuts the parts of a snippet into tokens; comments are dropped.
func sqlTokens(parts []sqlPart) []sqlToken {
	var toks []sqlToken
	off := 0 // the parts cut the snippet without gaps
	for _, p := range parts {
		at := off
		off += len(p.text)
		if !p.code {
			if isComment(p.text) {
				continue
			}
			kind := tokString
			if p.text[0] == '`' {
				kind = tokIdent
			}
			toks = append(toks, sqlToken{text: unquoteSQL(p.text), kind: kind, pos: at})
			continue
		}
		s := p.text
		for i := 0; i < len(s); {
			c := s[i]
			switch {
			case c <= ' ':
				i++
			case isWordByte(c) || c >= 0x80:
				j := i + 1
				for j < len(s) && (isWordByte(s[j]) || s[j] >= 0x80) {
					j++
				}
				toks = append(toks, sqlToken{text: s[i:j], kind: tokWord, pos: at + i})
				i = j
			default:
				toks = append(toks, sqlToken{text: s[i : i+1], kind: tokPunct, pos: at + i})
				i++
			}
		}
	}
	return toks
}

// unquoteSQL strips the quotes of a quoted part and undoes doubled quotes
// (backslash escapes are kept as written: the text only names a column).
func unquoteSQL(q string) string {
	if len(q) < 2 {
		return q
	}
	c := q[:1]
	return strings.ReplaceAll(q[1:len(q)-1], c+c, c)
}

// executableComment reports whether a comment part is one MySQL and
// MariaDB execute as SQL: /*! ... */ and /*M! ... */.
func executableComment(part string) bool {
	return strings.HasPrefix(part, "/*!") || strings.HasPrefix(part, "/*M!")
}

// statement lexes one SQL snippet of the configuration and checks what
// every snippet must be: lexically complete, one statement without a
// trailing ";", and free of executable comments, whose text the server
// runs although every check here skips it. It returns the tokens of the
// code, or a problem phrased to follow the snippet's name ("evidence has
// ...").
func statement(q string) ([]sqlToken, string) {
	parts, err := splitSQL(q)
	if err != nil {
		return nil, err.Error()
	}
	for _, p := range parts {
		if !p.code && executableComment(p.text) {
			return nil, "has a /*! ... */ comment, which MySQL executes as SQL although opctl's checks skip it: write its text as plain SQL, or remove it"
		}
	}
	toks := sqlTokens(parts)
	if len(toks) == 0 {
		return nil, "is empty"
	}
	for i, t := range toks {
		if t.kind != tokPunct || t.text != ";" {
			continue
		}
		rest := toks[i+1:]
		for len(rest) > 0 && rest[0].kind == tokPunct && rest[0].text == ";" {
			rest = rest[1:]
		}
		if len(rest) == 0 {
			return nil, `ends with ";": write the statement without it (opctl runs each snippet as one statement, and reconcile nests evidence and entity queries in larger ones)`
		}
		w := rest[0].text
		if len(w) > 20 {
			w = w[:20] + "..."
		}
		return nil, fmt.Sprintf("holds more than one statement (%q follows a \";\"): write one statement", w)
	}
	return toks, ""
}

// startsWith is the problem of a statement that does not start with one of
// the keywords, or "".
func startsWith(toks []sqlToken, what string, keywords ...string) string {
	for _, k := range keywords {
		if toks[0].is(k) {
			return ""
		}
	}
	w := toks[0].text
	if len(w) > 20 {
		w = w[:20] + "..."
	}
	return fmt.Sprintf("must be %s (it starts with %q)", what, w)
}

// checkQuery reports what is wrong with an evidence, intent or entity
// query, or "": one SELECT statement with exactly one ? placeholder (the
// biz_id), counted outside quoted strings, quoted identifiers and comments.
func checkQuery(q string) string {
	toks, problem := statement(q)
	if problem != "" {
		return problem
	}
	if p := startsWith(toks, "a SELECT", "SELECT"); p != "" {
		return p + "; opctl only reads with it"
	}
	n := 0
	for _, t := range toks {
		if t.kind == tokPunct && t.text == "?" {
			n++
		}
	}
	if n != 1 {
		return fmt.Sprintf("must contain exactly one ? placeholder (bound to the biz_id), found %d", n)
	}
	return ""
}

// checkReverse reports what is wrong with a reverse statement, or "", and
// returns the :names it binds: one INSERT, UPDATE or DELETE statement,
// without ? placeholders.
func checkReverse(stmt string) ([]string, string) {
	toks, problem := statement(stmt)
	if problem != "" {
		return nil, problem
	}
	if p := startsWith(toks, "one INSERT, UPDATE or DELETE", "INSERT", "UPDATE", "DELETE"); p != "" {
		return nil, p + ": a reverse statement undoes one evidence row"
	}
	_, names, err := NamedParams(stmt)
	if err != nil {
		return nil, err.Error() + " (write :biz_id, or :column for a column of the evidence row)"
	}
	return names, ""
}

// selectColumns returns the names of the columns a SELECT returns, as the
// server names them, when its select list can be read without the schema:
// every item a column (id, j.id, `j`.`id`) or an expression with an alias
// (... AS n, ... n). With a `*` or an expression without an alias
// the columns are known only when the query runs, and ok is false.
func selectColumns(q string) (cols []string, ok bool) {
	toks, problem := statement(q)
	if problem != "" || len(toks) == 0 || !toks[0].is("SELECT") {
		return nil, false
	}
	var item []sqlToken
	depth := 0
	for _, t := range toks[1:] {
		if t.kind == tokPunct {
			switch t.text {
			case "(":
				depth++
			case ")":
				depth--
			}
		}
		if depth == 0 && (t.kind == tokPunct && t.text == "," || endsSelectList(t)) {
			name, ok := itemName(item)
			if !ok {
				return nil, false
			}
			cols = append(cols, name)
			item = item[:0]
			if t.kind == tokWord {
				return cols, true
			}
			continue
		}
		item = append(item, t)
	}
	name, ok := itemName(item)
	if !ok {
		return nil, false
	}
	return append(cols, name), true
}

// endsSelectList reports whether a word outside parentheses ends the select
// list of a SELECT.
func endsSelectList(t sqlToken) bool {
	for _, w := range []string{"FROM", "INTO", "WHERE", "GROUP", "HAVING", "WINDOW", "ORDER", "LIMIT",
		"UNION", "EXCEPT", "INTERSECT", "FOR", "LOCK", "PROCEDURE"} {
		if t.is(w) {
			return true
		}
	}
	return false
}

// itemName is the name the server gives one item of a select list, when
// it can be told without the schema: the item's alias, or the column of a
// column reference.
func itemName(item []sqlToken) (string, bool) {
	n := len(item)
	if n == 0 {
		return "", false
	}
	last := item[n-1]
	if last.kind == tokPunct {
		return "", false // *, t.*, f(x): known only when the query runs
	}
	if n == 1 {
		return last.text, true
	}
	prev := item[n-2]
	switch {
	case prev.kind == tokPunct && prev.text == ".":
		// t.col or schema.t.col: a column reference when all of it is.
		for i, t := range item {
			if i%2 == 1 && (t.kind != tokPunct || t.text != ".") || i%2 == 0 && t.kind != tokWord && t.kind != tokIdent {
				return "", false
			}
		}
		return last.text, true
	case prev.is("AS"):
		return last.text, true
	case prev.kind == tokPunct && prev.text != ")":
		return "", false // an operator: x + y
	}
	// expr alias, without AS: MySQL names the column by the alias.
	return last.text, true
}
