package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// checkSelect reports what is wrong with a query that must be a SELECT with
// exactly one `?` placeholder (the biz_id), or "".
func checkSelect(q string) string {
	t := strings.TrimLeft(q, " \t\r\n")
	if t == "" {
		return "is empty"
	}
	if len(t) < 6 || !strings.EqualFold(t[:6], "SELECT") || (len(t) > 6 && isWordByte(t[6])) {
		w := t
		if i := strings.IndexAny(w, " \t\r\n("); i >= 0 {
			w = w[:i]
		}
		if len(w) > 20 {
			w = w[:20] + "..."
		}
		return fmt.Sprintf("must be a SELECT (it starts with %q); opctl only reads with it", w)
	}
	n, err := countPlaceholders(t)
	if err != nil {
		return err.Error()
	}
	if n != 1 {
		return fmt.Sprintf("must contain exactly one ? placeholder (bound to the biz_id), found %d", n)
	}
	return ""
}

// checkTemplate checks the {name} placeholders of a template against
// allowed, returning the names used.
func checkTemplate(s string, allowed []string) ([]string, string) {
	var names []string
	for i := 0; i < len(s); i++ {
		if s[i] != '{' {
			continue
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return names, fmt.Sprintf("has an unclosed { at byte %d", i)
		}
		name := s[i+1 : i+j]
		ok := false
		for _, a := range allowed {
			if name == a {
				ok = true
			}
		}
		if !ok {
			want := make([]string, len(allowed))
			for k, a := range allowed {
				want[k] = "{" + a + "}"
			}
			return names, fmt.Sprintf("uses unknown placeholder {%s}%s; the placeholders are %s",
				name, didYouMean(name, allowed), strings.Join(want, " and "))
		}
		names = append(names, name)
		i += j
	}
	return names, ""
}

// urlPlaceholders are the placeholders of probe and compensate templates.
var urlPlaceholders = []string{"request_id", "biz_id"}

// checkURLTemplate checks an HTTP(S) URL template and returns the
// placeholders it uses.
func checkURLTemplate(s string) ([]string, string) {
	names, problem := checkTemplate(s, urlPlaceholders)
	if problem != "" {
		return names, problem
	}
	filled := s
	for _, p := range urlPlaceholders {
		filled = strings.ReplaceAll(filled, "{"+p+"}", "x")
	}
	u, err := url.Parse(filled)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return names, "must be an http:// or https:// URL with a host"
	}
	return names, ""
}

// checkHostPort reports what is wrong with a host:port broker address, or "".
func checkHostPort(s string) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "is not host:port (e.g. 127.0.0.1:9092)"
	}
	if host == "" {
		return "has no host (want host:port, e.g. 127.0.0.1:9092)"
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Sprintf("has port %q; want a number from 1 to 65535", port)
	}
	return ""
}

// checkDSN reports what is structurally wrong with a go-sql-driver/mysql
// DSN, or "". It does not connect.
func checkDSN(dsn string) string {
	if strings.Contains(dsn, "://") {
		return "looks like a URL; opctl wants a go-sql-driver/mysql DSN such as user:pass@tcp(127.0.0.1:3306)/db"
	}
	if !strings.Contains(dsn, "/") {
		return "has no /dbname part (want user:pass@tcp(host:3306)/db)"
	}
	return ""
}
