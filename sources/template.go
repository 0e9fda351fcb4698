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
