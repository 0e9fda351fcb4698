package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

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
	// An id from the database must never choose the server opctl calls:
	// placeholders go in the path or the query only (docs/config.md).
	if h := hostPart(s); strings.Contains(h, "{") {
		return names, "has a placeholder before its path (in the scheme, user or host): an id must never choose the server opctl calls; put placeholders in the path or the query"
	}
	return names, ""
}

// hostPart is what a URL template holds before its path, query or
// fragment: the scheme, userinfo and host.
func hostPart(s string) string {
	start := 0
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + 3
	}
	end := len(s)
	if i := strings.IndexAny(s[start:], "/?#"); i >= 0 {
		end = start + i
	}
	return s[:end]
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
