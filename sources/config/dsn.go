package config

import "strings"

// RedactDSN returns dsn with its password replaced by "***", so that a DSN
// can be printed or logged: "app:s3cr@t@tcp(db:3306)/pay?parseTime=true"
// becomes "app:***@tcp(db:3306)/pay?parseTime=true".
//
// It follows go-sql-driver/mysql's own parsing (the database name follows
// the last "/", the credentials end at the last "@" before it, and the user
// ends at the first ":"), so a password containing "@", ":", "/" or "?" is
// redacted whole. Where the DSN is malformed it errs on the side of hiding
// too much. A "scheme://user:pass@host/db" URL is handled the same way. A
// DSN without a password (or with an empty one) is returned unchanged.
func RedactDSN(dsn string) string {
	at := -1
	if slash := strings.LastIndexByte(dsn, '/'); slash >= 0 {
		at = strings.LastIndexByte(dsn[:slash], '@')
	}
	if at < 0 {
		at = strings.LastIndexByte(dsn, '@')
	}
	if at < 0 {
		return dsn
	}
	start := 0
	if i := strings.Index(dsn, "://"); i > 0 && i < at && isScheme(dsn[:i]) {
		start = i + 3
	}
	colon := strings.IndexByte(dsn[start:at], ':')
	if colon < 0 || start+colon+1 == at {
		return dsn
	}
	return dsn[:start+colon+1] + "***" + dsn[at:]
}

// isScheme reports whether s is a URL scheme (letters, digits, "+", "-",
// "."), so that a password containing "://" is not mistaken for one.
func isScheme(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.') {
			return false
		}
	}
	return s != ""
}
