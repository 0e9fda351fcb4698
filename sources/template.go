package sources

import (
	"net/url"
	"strings"
)

// Expand replaces each {name} in tmpl with vars[name]. With escape set, each
// value is URL-query-escaped (for probe URLs). Unknown names are left as they
// are so that a typo stays visible in the result.
func Expand(tmpl string, vars map[string]string, escape bool) string {
	var sb strings.Builder
	for {
		i := strings.IndexByte(tmpl, '{')
		if i < 0 {
			sb.WriteString(tmpl)
			return sb.String()
		}
		j := strings.IndexByte(tmpl[i:], '}')
		if j < 0 {
			sb.WriteString(tmpl)
			return sb.String()
		}
		name := tmpl[i+1 : i+j]
		v, ok := vars[name]
		sb.WriteString(tmpl[:i])
		if ok {
			if escape {
				v = url.QueryEscape(v)
			}
			sb.WriteString(v)
		} else {
			sb.WriteString(tmpl[i : i+j+1])
		}
		tmpl = tmpl[i+j+1:]
	}
}

// RedactURL returns rawURL without its userinfo. A URL that does not parse is
// redacted textually (everything between "://" and the last "@" of the
// authority).
func RedactURL(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		if u.User == nil {
			return rawURL
		}
		u.User = nil
		return u.String()
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return rawURL
	}
	authority, path := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:]
	}
	return scheme + "://" + authority + path
}
