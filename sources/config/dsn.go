package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

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

// redactSecrets is msg, an error message, with the password of every
// DSN-shaped text in it replaced by "***" (RedactDSN): each Go-quoted
// string ("...", as %q writes a value: spaces and quotes in the password
// included) and each word, inside such a string or outside. DSN-shaped:
// RedactDSN changes it and the user before the password holds no space (so
// that an SQL snippet with ":name" and "@" keeps its text). A configuration
// error may quote any value of the file, or of the environment a ${VAR}
// took it from.
func redactSecrets(msg string) string {
	if !strings.Contains(msg, "@") {
		return msg
	}
	var b strings.Builder
	for i := 0; i < len(msg); {
		if msg[i] == '"' {
			if q, err := strconv.QuotedPrefix(msg[i:]); err == nil {
				i += len(q)
				if u, err := strconv.Unquote(q); err == nil {
					r, ok := redactShaped(u)
					if !ok {
						r = redactWords(u)
					}
					if r != u {
						q = strconv.Quote(r)
					}
				}
				b.WriteString(q)
				continue
			}
		}
		j := i + 1
		for j < len(msg) && msg[j] != '"' {
			j++
		}
		b.WriteString(redactWords(msg[i:j]))
		i = j
	}
	return b.String()
}

// redactWords is s with each DSN-shaped word (between spaces) redacted.
func redactWords(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	words := strings.Split(s, " ")
	for i, w := range words {
		if r, ok := redactShaped(w); ok {
			words[i] = r
		}
	}
	return strings.Join(words, " ")
}

// redactShaped is RedactDSN(s), and whether s is DSN-shaped: it had a
// password, after a user without a space.
func redactShaped(s string) (string, bool) {
	r := RedactDSN(s)
	if r == s {
		return s, false
	}
	return r, !strings.ContainsAny(r[:strings.Index(r, "***")], " \t\n")
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

// dsnParts is a DSN cut where go-sql-driver/mysql cuts it:
// [user[:password]@][net[(addr)]]/dbname[?params]. The database name follows
// the last "/", the credentials end at the last "@" before it.
type dsnParts struct {
	head   string // up to and including the "@" ("" without credentials)
	netAdr string // net[(addr)]
	db     string // the database name as written
	query  string // the parameters, after "?" ("" without)
	rest   string // "/" and everything after it
}

func splitDSN(dsn string) (dsnParts, bool) {
	slash := strings.LastIndexByte(dsn, '/')
	if slash < 0 {
		return dsnParts{}, false
	}
	var p dsnParts
	left := dsn[:slash]
	at := strings.LastIndexByte(left, '@')
	p.head, p.netAdr = left[:at+1], left[at+1:]
	p.rest = dsn[slash:]
	p.db, p.query, _ = strings.Cut(dsn[slash+1:], "?")
	return p, true
}

// DSNDatabase is the database name of a go-sql-driver/mysql DSN
// (%-unescaped), or "" when it names none or is not well formed
// (CheckDSN says why).
func DSNDatabase(dsn string) string {
	p, ok := splitDSN(dsn)
	if !ok {
		return ""
	}
	db, err := url.PathUnescape(p.db)
	if err != nil {
		return ""
	}
	return db
}

// CheckDSN reports what is wrong with the form of a go-sql-driver/mysql DSN
// for opctl, or "": it must be user:pass@tcp(host:port)/db (or
// unix(/path)/db) with a database name, and its parameters key=value pairs,
// %-escaped. What each parameter means is the driver's to read: the driver
// package's check (sources/mysql.CheckDSN, which starts with this one)
// reads them with the driver and refuses those of docs/config.md#mysql.
// The problem reads after the DSN ("mysql.dsn "u:***@..." has ..."), names
// the fix, and never holds the password. It does not connect.
func CheckDSN(dsn string) string {
	if strings.Contains(dsn, "://") {
		return "looks like a URL; opctl wants a go-sql-driver/mysql DSN such as user:pass@tcp(127.0.0.1:3306)/db"
	}
	p, ok := splitDSN(dsn)
	if !ok {
		return "has no /dbname part (want user:pass@tcp(host:3306)/db)"
	}
	if problem := checkDSNAddr(p); problem != "" {
		return problem
	}
	db, err := url.PathUnescape(p.db)
	switch {
	case err != nil:
		return fmt.Sprintf("has a database name %q that is not properly %%-escaped", p.db)
	case db == "":
		fix := p.head + p.netAdr + "/<database>"
		if p.query != "" {
			fix += "?" + p.query
		}
		return fmt.Sprintf("names no database after the \"/\": write the consumers' database there, e.g. %q", RedactDSN(fix))
	}
	return checkDSNParams(p.query)
}

// checkDSNAddr checks net(addr): tcp(host[:port]) or unix(/path), or one of
// the bare networks the driver gives a default address (tcp: 127.0.0.1:3306).
func checkDSNAddr(p dsnParts) string {
	na := p.netAdr
	open := strings.IndexByte(na, '(')
	if strings.ContainsAny(na, "/?") && !strings.HasSuffix(na, ")") {
		// The last "/" is inside a parameter value, as the driver reads it.
		return "has a \"/\" in a parameter value: escape it as %2F (loc=Asia%2FShanghai)"
	}
	if open < 0 {
		switch na {
		case "", "tcp", "tcp4", "tcp6", "unix":
			return ""
		}
		return fmt.Sprintf("has its address outside tcp(...): write %q", RedactDSN(p.head+"tcp("+na+")"+p.rest))
	}
	if !strings.HasSuffix(na, ")") {
		return "has an address without its closing \")\": write tcp(host:3306)"
	}
	network, addr := na[:open], na[open+1:len(na)-1]
	switch network {
	case "tcp", "tcp4", "tcp6":
	case "unix":
		return ""
	default:
		return fmt.Sprintf("has network %q: write tcp(host:3306) or unix(/path/to/mysqld.sock)", network)
	}
	if addr == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "" // a host alone: the driver adds port 3306
	}
	if host == "" {
		return fmt.Sprintf("has address %q without a host: write %q", addr, "tcp(host:"+port+")")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Sprintf("has port %q in %q; want a number from 1 to 65535 (MySQL's is 3306)", port, "tcp("+addr+")")
	}
	return ""
}

// checkDSNParams checks the form of the parameters after "?" as the
// driver reads them: "&"-separated key=value, values %-escaped.
func checkDSNParams(query string) string {
	for kv := range strings.SplitSeq(query, "&") {
		if kv == "" {
			continue
		}
		key, val, found := strings.Cut(kv, "=")
		if !found {
			return fmt.Sprintf("has parameter %q without a value: write %q, or remove it", key, key+"=VALUE")
		}
		if _, err := url.QueryUnescape(val); err != nil {
			return fmt.Sprintf("has parameter %q that is not properly %%-escaped", kv)
		}
	}
	return ""
}

// TimeZone is mysql.time_zone resolved (docs/config.md#mysql): the session
// time zone opctl sets on every connection, and the location the DATETIMEs
// read in it stand for.
type TimeZone struct {
	// Set is the value of SET time_zone, quoted ('+08:00', 'Asia/Shanghai',
	// 'SYSTEM'); "" keeps the server's default, @@global.time_zone.
	Set string
	// Loc is the location of the zone; nil when only the server can say
	// (mysql.time_zone unset or SYSTEM).
	Loc *time.Location
}

// ParseTimeZone reads a mysql.time_zone value: "" (the server's
// @@global.time_zone), SYSTEM (the server's system zone), an offset
// "+08:00" / "-05:30" (hours 0 to 14), UTC, or a zone name of the IANA
// database ("Asia/Shanghai"; the server needs its time zone tables loaded,
// and this machine the zone). The problem is "" when s is valid, else it
// reads after the value ("mysql.time_zone "x" is not ...").
func ParseTimeZone(s string) (TimeZone, string) {
	switch {
	case s == "":
		return TimeZone{}, ""
	case strings.EqualFold(s, "SYSTEM"):
		return TimeZone{Set: "'SYSTEM'"}, ""
	case s == "UTC":
		return TimeZone{Set: "'+00:00'", Loc: time.UTC}, ""
	case s[0] == '+' || s[0] == '-':
		h, m, ok := strings.Cut(s[1:], ":")
		hours, err1 := strconv.Atoi(h)
		mins, err2 := strconv.Atoi(m)
		if !ok || len(h) < 1 || len(h) > 2 || len(m) != 2 || !every(h, isDigit) || !every(m, isDigit) ||
			err1 != nil || err2 != nil || hours > 14 || mins > 59 {
			return TimeZone{}, "is not an offset: want [+-]HH:MM from -14:00 to +14:00, e.g. \"+08:00\""
		}
		secs := (hours*60 + mins) * 60
		if s[0] == '-' {
			secs = -secs
		}
		name := fmt.Sprintf("%c%02d:%02d", s[0], hours, mins)
		return TimeZone{Set: "'" + name + "'", Loc: time.FixedZone(name, secs)}, ""
	}
	const want = `want an offset such as "+08:00", UTC, SYSTEM, or a zone name such as "Asia/Shanghai"`
	if strings.EqualFold(s, "Local") || !every(s, func(b byte) bool {
		return isASCIILetter(b) || isDigit(b) || b == '_' || b == '/' || b == '+' || b == '-'
	}) {
		return TimeZone{}, "is not a time zone: " + want
	}
	loc, err := time.LoadLocation(s)
	if err != nil {
		return TimeZone{}, "is not a time zone this machine knows: " + want
	}
	return TimeZone{Set: "'" + s + "'", Loc: loc}, ""
}
