package doctor

import (
	"fmt"
	"slices"
	"strings"
)

// The SHOW GRANTS parser of the grants check: what a user's grant lines
// give on a database or a table, and which write or replication
// privileges they carry. Pure functions over the lines the driver read
// (sources.DoctorFacts).

// privilege sets for the grants check.
var (
	writePrivs = []string{"INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "INDEX", "ALL", "ALL PRIVILEGES", "TRUNCATE",
		"CREATE VIEW", "TRIGGER", "EVENT", "CREATE ROUTINE", "ALTER ROUTINE", "REFERENCES", "SUPER", "FILE", "RELOAD", "SHUTDOWN"}
)

// grant is one parsed GRANT line that applies to the database.
type grant struct {
	privs []string
	// on is "*.*", "db.*" or "db.table" (no quotes, lower case).
	on string
}

// parseGrants parses SHOW GRANTS lines; lines that grant a role or a proxy
// are ignored.
func parseGrants(lines []string) []grant {
	var out []grant
	for _, l := range lines {
		u := strings.TrimSpace(l)
		if !strings.HasPrefix(upperASCII(u), "GRANT ") {
			continue
		}
		u = u[len("GRANT "):]
		on := topLevelIndex(upperASCII(u), " ON ")
		if on < 0 {
			continue // a role
		}
		privText, rest := u[:on], u[on+len(" ON "):]
		to := strings.Index(upperASCII(rest), " TO ")
		if to < 0 {
			continue
		}
		obj := strings.TrimSpace(rest[:to])
		if strings.HasPrefix(strings.ToUpper(obj), "PROCEDURE ") || strings.HasPrefix(strings.ToUpper(obj), "FUNCTION ") {
			continue
		}
		obj = strings.TrimPrefix(strings.TrimPrefix(obj, "TABLE "), "table ")
		obj = strings.ToLower(strings.NewReplacer("`", "", "'", "", "\"", "").Replace(obj))
		var privs []string
		for _, p := range splitTop(privText) {
			p = strings.ToUpper(strings.TrimSpace(p))
			if i := strings.IndexByte(p, '('); i >= 0 {
				p = strings.TrimSpace(p[:i]) // a column privilege: SELECT (a, b)
			}
			if p == "PROXY" {
				privs = nil
				break
			}
			if p != "" {
				privs = append(privs, p)
			}
		}
		if len(privs) > 0 {
			out = append(out, grant{privs: privs, on: obj})
		}
	}
	return out
}

// upperASCII is s with its ASCII letters in upper case and every other
// byte as it was: an index into it is an index into s (strings.ToUpper
// may change a string's length: invalid UTF-8, 'ſ', 'ı').
func upperASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// topLevelIndex is the index of sep in s outside parentheses, or -1.
func topLevelIndex(s, sep string) int {
	depth := 0
	for i := 0; i+len(sep) <= len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		}
		if depth == 0 && s[i:i+len(sep)] == sep {
			return i
		}
	}
	return -1
}

// splitTop splits s at commas outside parentheses.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// privileges are what the grants give on db (and on table, "" for the
// database as a whole).
func privileges(gs []grant, db, table string) map[string]bool {
	db = strings.ToLower(db)
	out := map[string]bool{}
	for _, g := range gs {
		applies := g.on == "*.*" || g.on == db+".*" || (table != "" && g.on == db+"."+strings.ToLower(table))
		if !applies {
			continue
		}
		for _, p := range g.privs {
			out[p] = true
		}
	}
	if out["ALL"] || out["ALL PRIVILEGES"] {
		for _, p := range append([]string{"SELECT"}, writePrivs...) {
			out[p] = true
		}
	}
	return out
}

// anyWrite lists the write privileges the grants give anywhere.
func anyWrite(gs []grant) []string {
	var out []string
	for _, g := range gs {
		for _, p := range g.privs {
			if slices.Contains(writePrivs, p) && p != "USAGE" {
				out = append(out, fmt.Sprintf("%s ON %s", p, g.on))
			}
		}
	}
	return out
}

// replicationLacks are the replication grants a binlog reader needs that
// gs do not give: REPLICATION SLAVE, and REPLICATION CLIENT (MariaDB
// 10.5+ calls it BINLOG MONITOR), globally.
func replicationLacks(gs []grant) []string {
	have := map[string]bool{}
	for _, g := range gs {
		if g.on != "*.*" {
			continue
		}
		for _, p := range g.privs {
			have[p] = true
		}
	}
	all := have["ALL"] || have["ALL PRIVILEGES"]
	var lack []string
	if !all && !have["REPLICATION SLAVE"] && !have["REPLICATION REPLICA"] {
		lack = append(lack, "REPLICATION SLAVE")
	}
	if !all && !have["REPLICATION CLIENT"] && !have["BINLOG MONITOR"] {
		lack = append(lack, "REPLICATION CLIENT")
	}
	return lack
}
