package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
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

// DSN parameters: which go-sql-driver/mysql parameters a DSN may carry
// (docs/config.md#mysql). The driver sends any other parameter to the server
// as a session variable (SET name = value, the value as written), so a typo
// ("parsetime=true") fails every connection with a server error and a value
// would reach SQL unchecked: opctl accepts the driver's own parameters and a
// few session variables whose values it checks, and refuses the rest.
const (
	dsnBool     = iota // the driver's true/false, 1/0
	dsnDuration        // a Go duration: 5s, 500ms
	dsnInt             // a non-negative integer
	dsnNumber          // a non-negative decimal number
	dsnLoc             // a time zone name
	dsnCharset         // charset names, comma-separated
	dsnName            // one collation name
	dsnTLS             // true, false, skip-verify, preferred
	dsnText            // anything (URL-escaped)
	dsnRefused         // a driver parameter opctl refuses; the value is why
)

// dsnParam is what a DSN parameter may hold; why is the reason of a refusal.
type dsnParam struct {
	name string
	kind int
	why  string
	// session marks a session variable rather than a driver parameter.
	session bool
}

// dsnParams lists the accepted and refused parameters. It is a function, not
// a package variable, so that nothing is built at package init.
func dsnParams() []dsnParam {
	return []dsnParam{
		{name: "allowCleartextPasswords", kind: dsnBool},
		{name: "allowFallbackToPlaintext", kind: dsnBool},
		{name: "allowNativePasswords", kind: dsnBool},
		{name: "allowOldPasswords", kind: dsnBool},
		{name: "charset", kind: dsnCharset},
		{name: "checkConnLiveness", kind: dsnBool},
		{name: "collation", kind: dsnName},
		{name: "compress", kind: dsnBool},
		{name: "connectionAttributes", kind: dsnText},
		{name: "interpolateParams", kind: dsnBool},
		{name: "loc", kind: dsnLoc},
		{name: "maxAllowedPacket", kind: dsnInt},
		{name: "multiStatements", kind: dsnBool},
		{name: "parseTime", kind: dsnBool},
		{name: "readTimeout", kind: dsnDuration},
		{name: "rejectReadOnly", kind: dsnBool},
		{name: "timeTruncate", kind: dsnDuration},
		{name: "timeout", kind: dsnDuration},
		{name: "tls", kind: dsnTLS},
		{name: "writeTimeout", kind: dsnDuration},

		{name: "allowAllFiles", kind: dsnRefused, why: "it would let the server read any file of this machine (LOAD DATA LOCAL INFILE); opctl never loads files"},
		{name: "clientFoundRows", kind: dsnRefused, why: "opctl counts the rows a statement changed (a repair statement that changes nothing is refused); with it, a row matched but left unchanged would count"},
		{name: "columnsWithAlias", kind: dsnRefused, why: "opctl reads evidence columns by their names (a reverse statement binds :column); with it, they would be renamed table.column"},
		{name: "serverPubKey", kind: dsnRefused, why: "it names a key registered in Go code (mysql.RegisterServerPubKey), which opctl does not do; use tls=true"},
		{name: "strict", kind: dsnRefused, why: "it was removed from go-sql-driver/mysql"},

		{name: "innodb_lock_wait_timeout", kind: dsnInt, session: true},
		{name: "lock_wait_timeout", kind: dsnInt, session: true},
		{name: "max_execution_time", kind: dsnInt, session: true},
		{name: "max_statement_time", kind: dsnNumber, session: true},
		{name: "time_zone", kind: dsnText, session: true},
	}
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

// CheckDSN reports what is wrong with a go-sql-driver/mysql DSN for opctl,
// or "": it must be user:pass@tcp(host:port)/db (or unix(/path)/db) with a
// database name, and carry only the parameters of docs/config.md#mysql.
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

// checkDSNParams checks the parameters after "?" as the driver reads them
// ("&"-separated key=value; values %-escaped).
func checkDSNParams(query string) string {
	if query == "" {
		return ""
	}
	known := dsnParams()
	for kv := range strings.SplitSeq(query, "&") {
		if kv == "" {
			continue
		}
		key, val, found := strings.Cut(kv, "=")
		if !found {
			return fmt.Sprintf("has parameter %q without a value: write %q, or remove it", key, key+"=VALUE")
		}
		i := slices.IndexFunc(known, func(d dsnParam) bool { return d.name == key })
		if i < 0 {
			return unknownDSNParam(key, known)
		}
		if problem := checkDSNValue(known[i], val); problem != "" {
			return problem
		}
	}
	return ""
}

func unknownDSNParam(key string, known []dsnParam) string {
	var driver, session, all []string
	for _, d := range known {
		switch {
		case d.kind == dsnRefused:
			continue
		case d.session:
			session = append(session, d.name)
		default:
			driver = append(driver, d.name)
		}
		all = append(all, d.name)
	}
	return fmt.Sprintf("has unknown parameter %q%s: the driver would send it to the server as a session variable; remove it (accepted: the driver's %s; the session variables %s)",
		key, didYouMean(key, all), strings.Join(driver, ", "), strings.Join(session, ", "))
}

// checkDSNValue checks one parameter's value.
func checkDSNValue(d dsnParam, raw string) string {
	if d.kind == dsnRefused {
		return fmt.Sprintf("has parameter %q, which opctl refuses: %s; remove it", d.name, d.why)
	}
	val, err := url.QueryUnescape(raw)
	if err != nil {
		return fmt.Sprintf("has parameter %q that is not properly %%-escaped", d.name+"="+raw)
	}
	bad := func(want string) string {
		return fmt.Sprintf("has %q; want %s", d.name+"="+raw, want)
	}
	switch d.kind {
	case dsnBool:
		// The driver reads the value as written, not unescaped.
		switch raw {
		case "1", "true", "TRUE", "True", "0", "false", "FALSE", "False":
			return ""
		}
		return bad("true or false")
	case dsnDuration:
		if _, err := time.ParseDuration(raw); err != nil {
			return bad("a duration such as 5s or 500ms")
		}
	case dsnInt:
		if val == "" || !every(val, isDigit) {
			return bad("a whole number")
		}
	case dsnNumber:
		whole, frac, _ := strings.Cut(val, ".")
		if whole == "" || !every(whole, isDigit) || !every(frac, isDigit) {
			return bad("a number")
		}
	case dsnLoc:
		if _, err := time.LoadLocation(val); err != nil {
			return bad("a time zone name such as UTC or Asia%2FShanghai (opctl reads times in mysql.time_zone anyway)")
		}
	case dsnCharset:
		for cs := range strings.SplitSeq(raw, ",") {
			if cs == "" || !every(cs, isWordByte) || strings.Contains(cs, "$") {
				return bad("charset names such as utf8mb4")
			}
		}
	case dsnName:
		if raw == "" || !every(raw, isWordByte) || strings.Contains(raw, "$") {
			return bad("a collation name such as utf8mb4_general_ci")
		}
	case dsnTLS:
		switch raw {
		case "1", "true", "TRUE", "True", "0", "false", "FALSE", "False":
			return ""
		}
		if v := strings.ToLower(raw); v == "skip-verify" || v == "preferred" {
			return ""
		}
		return bad("true, false, skip-verify or preferred (opctl registers no named TLS configuration)")
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
