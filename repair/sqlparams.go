package repair

import (
	"fmt"

	"github.com/opctl-dev/opctl/sources/probe"
)

// namedParams rewrites the :name parameters of a reverse statement as ?
// and returns the names in order. Quoted strings ('...', "..."), quoted
// identifiers (`...`), comments (-- , #, /* */), :: and := are left alone.
func namedParams(stmt string) (string, []string, error) {
	return bindNamed(stmt, func(string) string { return "?" })
}

// bindNamed is namedParams with a placeholder per name (a DECIMAL value is
// bound as CAST(? AS DECIMAL(65,30)) so that arithmetic on it stays exact).
func bindNamed(stmt string, placeholder func(name string) string) (string, []string, error) {
	var out []byte
	var names []string
	n := len(stmt)
	for i := 0; i < n; i++ {
		c := stmt[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for ; j < n; j++ {
				if stmt[j] == '\\' && c != '`' {
					j++
					continue
				}
				if stmt[j] == c {
					if j+1 < n && stmt[j+1] == c { // doubled quote
						j++
						continue
					}
					break
				}
			}
			if j >= n {
				return "", nil, fmt.Errorf("unterminated %c quote", c)
			}
			out = append(out, stmt[i:j+1]...)
			i = j
		case c == '#' || (c == '-' && i+2 < n && stmt[i+1] == '-' && (stmt[i+2] == ' ' || stmt[i+2] == '\t')):
			j := i
			for j < n && stmt[j] != '\n' {
				j++
			}
			out = append(out, stmt[i:j]...)
			i = j - 1
		case c == '/' && i+1 < n && stmt[i+1] == '*':
			j := i + 2
			for j+1 < n && !(stmt[j] == '*' && stmt[j+1] == '/') {
				j++
			}
			if j+1 >= n {
				return "", nil, fmt.Errorf("unterminated /* comment")
			}
			out = append(out, stmt[i:j+2]...)
			i = j + 1
		case c == ':' && i+1 < n && (stmt[i+1] == ':' || stmt[i+1] == '='):
			out = append(out, stmt[i:i+2]...)
			i++
		case c == ':' && i+1 < n && isIdentStart(stmt[i+1]) && (i == 0 || !isIdentByte(stmt[i-1])):
			j := i + 1
			for j < n && isIdentByte(stmt[j]) {
				j++
			}
			name := stmt[i+1 : j]
			names = append(names, name)
			out = append(out, placeholder(name)...)
			i = j - 1
		case c == '?':
			return "", nil, fmt.Errorf("has a ? placeholder: reverse statements bind :column names only")
		default:
			out = append(out, c)
		}
	}
	return string(out), names, nil
}

func isIdentStart(b byte) bool {
	return b == '_' || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')
}

func isIdentByte(b byte) bool { return isIdentStart(b) || (b >= '0' && b <= '9') || b == '$' }

// redactURL removes userinfo from a URL (credentials never enter a plan).
func redactURL(s string) string { return probe.Redact(s) }
