package doctor

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseGrants(t *testing.T) {
	for _, c := range []struct {
		name string
		line string
		want string // the grants as "PRIV,PRIV@on;..."
	}{
		{"usage", "GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '*AB'", "USAGE@*.*"},
		{"column privileges", "GRANT SELECT (`a`, `b`), INSERT ON `pay`.`t` TO `u`@`%`", "SELECT,INSERT@pay.t"},
		{"a role", "GRANT `role1` TO `u`@`%`", ""},
		{"a procedure", "GRANT EXECUTE ON PROCEDURE `pay`.`p` TO `u`@`%`", ""},
		{"a function", "GRANT EXECUTE ON FUNCTION `pay`.`f` TO `u`@`%`", ""},
		{"a proxy", "GRANT PROXY ON ''@'%' TO 'u'@'%' WITH GRANT OPTION", ""},
		{"not a grant", "not a grant", ""},
		{"lower case, spaces", "  grant select, update on pay.* to u@'%'  ", "SELECT,UPDATE@pay.*"},
		{"TABLE keyword", "GRANT SELECT ON TABLE `Pay`.`T` TO `u`@`%`", "SELECT@pay.t"},
		{"ALL PRIVILEGES", "GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION", "ALL PRIVILEGES@*.*"},
		{"ON inside a column list", "GRANT SELECT (` ON `), INSERT ON `pay`.`t` TO `u`@`%`", "SELECT,INSERT@pay.t"},
		{"no TO", "GRANT SELECT ON `pay`.*", ""},
		{"invalid UTF-8 (a crash found by FuzzParseGrants)", "GRANT 0\xec ON 0 TO u", "0\uFFFD@0"},
		{"a letter whose upper case is shorter", "GRANT ſelect ON x TO u", "SELECT@x"},
		{"double quotes", `GRANT SELECT ON "pay".* TO "u"@"%"`, "SELECT@pay.*"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := grantsText(parseGrants([]string{c.line})); got != c.want {
				t.Fatalf("parseGrants(%q) = %q, want %q", c.line, got, c.want)
			}
		})
	}
}

// grantsText is gs as "PRIV,PRIV@on;...".
func grantsText(gs []grant) string {
	var out []string
	for _, g := range gs {
		out = append(out, strings.Join(g.privs, ",")+"@"+g.on)
	}
	return strings.Join(out, ";")
}

func TestPrivileges(t *testing.T) {
	lines := []string{
		"GRANT USAGE ON *.* TO `u`@`%`",
		"GRANT SELECT (`a`, `b`), INSERT ON `pay`.`t` TO `u`@`%`",
		"GRANT UPDATE ON `shop`.* TO `u`@`%`",
		"GRANT ALL ON `admin`.* TO `u`@`%`",
	}
	gs := parseGrants(lines)
	for _, c := range []struct {
		db, table  string
		has, lacks []string
	}{
		{"pay", "t", []string{"SELECT", "INSERT", "USAGE"}, []string{"UPDATE", "DELETE"}},
		{"pay", "other", []string{"USAGE"}, []string{"SELECT", "INSERT"}},
		{"PAY", "T", []string{"SELECT", "INSERT"}, nil},
		{"pay", "", []string{"USAGE"}, []string{"SELECT"}},
		{"shop", "any", []string{"UPDATE"}, []string{"SELECT"}},
		{"shop", "", []string{"UPDATE"}, nil},
		{"admin", "x", []string{"SELECT", "INSERT", "UPDATE", "DELETE", "DROP"}, nil},
	} {
		p := privileges(gs, c.db, c.table)
		for _, h := range c.has {
			if !p[h] {
				t.Errorf("%s.%s: lacks %s (%v)", c.db, c.table, h, p)
			}
		}
		for _, l := range c.lacks {
			if p[l] {
				t.Errorf("%s.%s: has %s (%v)", c.db, c.table, l, p)
			}
		}
	}
}

func TestAnyWrite(t *testing.T) {
	for _, c := range []struct {
		lines []string
		want  string
	}{
		{[]string{"GRANT SELECT ON *.* TO `r`@`%`"}, ""},
		{[]string{"GRANT USAGE ON *.* TO `r`@`%`", "GRANT SELECT ON `pay`.* TO `r`@`%`"}, ""},
		{[]string{"GRANT SELECT, INSERT ON `pay`.* TO `r`@`%`"}, "INSERT ON pay.*"},
		{[]string{"GRANT ALL PRIVILEGES ON *.* TO `r`@`%`", "GRANT DELETE ON `pay`.`t` TO `r`@`%`"}, "ALL PRIVILEGES ON *.*,DELETE ON pay.t"},
	} {
		if got := strings.Join(anyWrite(parseGrants(c.lines)), ","); got != c.want {
			t.Errorf("%v: %q, want %q", c.lines, got, c.want)
		}
	}
}

func TestReplicationLacks(t *testing.T) {
	for _, c := range []struct {
		lines []string
		want  string
	}{
		{[]string{"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `b`@`%`"}, ""},
		{[]string{"GRANT BINLOG MONITOR, REPLICATION SLAVE ON *.* TO `b`@`%`"}, ""},
		{[]string{"GRANT REPLICATION REPLICA, BINLOG MONITOR ON *.* TO `b`@`%`"}, ""},
		{[]string{"GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost`"}, ""},
		{[]string{"GRANT REPLICATION SLAVE ON *.* TO `b`@`%`"}, "REPLICATION CLIENT"},
		{[]string{"GRANT SELECT ON `pay`.* TO `b`@`%`"}, "REPLICATION SLAVE,REPLICATION CLIENT"},
		{[]string{"GRANT ALL PRIVILEGES ON `pay`.* TO `b`@`%`"}, "REPLICATION SLAVE,REPLICATION CLIENT"},
	} {
		if got := strings.Join(replicationLacks(parseGrants(c.lines)), ","); got != c.want {
			t.Errorf("%v: lacks %q, want %q", c.lines, got, c.want)
		}
	}
}

func TestSplitTop(t *testing.T) {
	for _, c := range []struct {
		in, want string
	}{
		{"SELECT, INSERT", "SELECT| INSERT"},
		{"SELECT (a, b), INSERT (c)", "SELECT (a, b)| INSERT (c)"},
		{"", ""},
		{"a,,b", "a||b"},
		{"(a,(b,c)),d", "(a,(b,c))|d"},
	} {
		if got := strings.Join(splitTop(c.in), "|"); got != c.want {
			t.Errorf("splitTop(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	for _, c := range []struct {
		s, sep string
		want   int
	}{
		{"SELECT ON X", " ON ", 6},
		{"SELECT (A ON B) ON X", " ON ", 15},
		{"SELECT (A ON B)", " ON ", -1},
		{"", " ON ", -1},
	} {
		if got := topLevelIndex(c.s, c.sep); got != c.want {
			t.Errorf("topLevelIndex(%q, %q) = %d, want %d", c.s, c.sep, got, c.want)
		}
	}
}

// FuzzParseGrants: any SHOW GRANTS line (a server's, or one a user
// crafted) parses without a panic into grants whose privileges are upper
// case and trimmed and whose object is lower case without quotes, and
// what privileges and replicationLacks make of them holds together.
func FuzzParseGrants(f *testing.F) {
	for _, s := range []string{
		"GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '*AB'",
		"GRANT SELECT (`a`, `b`), INSERT ON `pay`.`t` TO `u`@`%`",
		"GRANT `role1` TO `u`@`%`",
		"GRANT EXECUTE ON PROCEDURE `pay`.`p` TO `u`@`%`",
		"GRANT PROXY ON ''@'%' TO 'u'@'%'",
		"GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION",
		"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `b`@`%`",
		"GRANT SELECT ((((( ON x TO y",
		"GRANT SELECT ))) ON x TO y",
	} {
		f.Add(s, "pay", "t")
	}
	f.Fuzz(func(t *testing.T, line, db, table string) {
		gs := parseGrants([]string{line, line})
		if len(gs)%2 != 0 {
			t.Fatalf("one line parsed twice gave %d grants", len(gs))
		}
		for _, g := range gs {
			if len(g.privs) == 0 {
				t.Fatalf("a grant without privileges: %+v", g)
			}
			if strings.ContainsAny(g.on, "`'\"") {
				t.Fatalf("object %q keeps quotes", g.on)
			}
			if utf8.ValidString(line) && g.on != strings.ToLower(g.on) {
				t.Fatalf("object %q is not lower case", g.on)
			}
			for _, p := range g.privs {
				if p == "" || p != strings.TrimSpace(p) || p == "PROXY" {
					t.Fatalf("privilege %q", p)
				}
				if utf8.ValidString(line) && p != strings.ToUpper(p) {
					t.Fatalf("privilege %q is not upper case", p)
				}
			}
		}
		p := privileges(gs, db, table)
		if p["ALL"] || p["ALL PRIVILEGES"] {
			for _, w := range writePrivs {
				if !p[w] {
					t.Fatalf("ALL without %s", w)
				}
			}
		}
		for _, l := range replicationLacks(gs) {
			if l != "REPLICATION SLAVE" && l != "REPLICATION CLIENT" {
				t.Fatalf("lacks %q", l)
			}
		}
	})
}
