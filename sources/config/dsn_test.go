package config

import (
	"strings"
	"testing"
	"time"
)

func TestRedactDSN(t *testing.T) {
	tests := []struct{ in, want, secret string }{
		{"", "", ""},
		{"u:p4ss@tcp(127.0.0.1:3306)/db", "u:***@tcp(127.0.0.1:3306)/db", "p4ss"},
		{"u:p@ss:w0rd@tcp(h:3306)/db?parseTime=true", "u:***@tcp(h:3306)/db?parseTime=true", "ss:w0rd"},
		{"u:pa/ss@tcp(h)/db", "u:***@tcp(h)/db", "pa/ss"},
		{"u:a://b@c@tcp(h)/db", "u:***@tcp(h)/db", "a://b@c"},
		{"u:x?y=z@tcp(h)/db?a=b", "u:***@tcp(h)/db?a=b", "x?y=z"},
		{"u:p@unix(/var/run/mysqld/mysqld.sock)/db", "u:***@unix(/var/run/mysqld/mysqld.sock)/db", ""},
		{"u:pw1@tcp(h)/db?x=a@b", "u:***@tcp(h)/db?x=a@b", "pw1"},
		{"u:pw1@tcp(h)", "u:***@tcp(h)", "pw1"},
		{"u:pw1@/db", "u:***@/db", "pw1"},
		{"mysql://u:pw1@h:3306/db", "mysql://u:***@h:3306/db", "pw1"},
		{"u@tcp(h)/db", "u@tcp(h)/db", ""},
		{"u:@tcp(h)/db", "u:@tcp(h)/db", ""},
		{"/db", "/db", ""},
		{"tcp(h:3306)/db", "tcp(h:3306)/db", ""},
	}
	for _, tt := range tests {
		got := RedactDSN(tt.in)
		if got != tt.want {
			t.Errorf("RedactDSN(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if tt.secret != "" && strings.Contains(got, tt.secret) {
			t.Errorf("RedactDSN(%q) = %q leaks %q", tt.in, got, tt.secret)
		}
	}
}

// TestCheckDSN: a DSN whose form opctl cannot use is a configuration error
// with its fix, and never shows the password (its parameters, as the
// driver reads them: sources/mysql's TestCheckDSN).
func TestCheckDSN(t *testing.T) {
	const pw = "s3cr3t-pw"
	tests := []struct {
		name, dsn string
		want      string // "" valid; else a part of the problem
	}{
		{"tcp with port", "u:" + pw + "@tcp(127.0.0.1:3306)/db", ""},
		{"tcp without port", "u@tcp(db-replica)/payments", ""},
		{"ipv6", "u:" + pw + "@tcp([::1]:3306)/db", ""},
		{"unix socket", "u:" + pw + "@unix(/var/run/mysqld/mysqld.sock)/db", ""},
		{"driver default address", "u:" + pw + "@/db", ""},
		{"password with / and @", "u:p/w@x@tcp(h:3306)/db", ""},
		{"empty segment is ignored as the driver does", "u@tcp(h)/db?parseTime=true&", ""},

		{"no database", "u:" + pw + "@tcp(h:3306)/", `names no database after the "/": write the consumers' database there, e.g. "u:***@tcp(h:3306)/<database>"`},
		{"no database, with parameters", "u:" + pw + "@tcp(h:3306)/?parseTime=true", `e.g. "u:***@tcp(h:3306)/<database>?parseTime=true"`},
		{"address without tcp()", "u:" + pw + "@127.0.0.1:3306/db", `has its address outside tcp(...): write "u:***@tcp(127.0.0.1:3306)/db"`},
		{"address without tcp() nor user", "db-host:3306/pay", `write "tcp(db-host:3306)/pay"`},
		{"port out of range", "u:" + pw + "@tcp(h:99999)/db", `has port "99999" in "tcp(h:99999)"; want a number from 1 to 65535`},
		{"port not a number", "u:" + pw + "@tcp(h:mysql)/db", `has port "mysql"`},
		{"no host", "u:" + pw + "@tcp(:3306)/db", `has address ":3306" without a host`},
		{"unknown network", "u:" + pw + "@udp(h:3306)/db", `has network "udp": write tcp(host:3306) or unix(/path/to/mysqld.sock)`},
		{"unclosed address", "u:" + pw + "@tcp(h:3306/db", `without its closing ")"`},
		{"unescaped / in a value", "u:" + pw + "@tcp(h:3306)/db?loc=Asia/Shanghai", `escape it as %2F`},
		{"unescaped / in a value, default address", "u:" + pw + "@/db?loc=Asia/Shanghai", `escape it as %2F`},
		{"unescaped / in a value, no credentials", "/db?loc=America/Argentina/Salta", `escape it as %2F`},
		{"bad escape", "u@tcp(h)/db?time_zone=%zz", `has parameter "time_zone=%zz" that is not properly %-escaped`},
		{"parameter without a value", "u@tcp(h)/db?parseTime", `has parameter "parseTime" without a value`},
		{"bad database escape", "u@tcp(h)/d%zz", `has a database name "d%zz"`},
		{"url", "mysql://u:" + pw + "@h:3306/db", `looks like a URL`},
		{"no slash", "u:" + pw + "@tcp(h:3306)", `has no /dbname part`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckDSN(tt.dsn)
			switch {
			case tt.want == "" && got != "":
				t.Errorf("CheckDSN(%q) = %q, want it accepted", tt.dsn, got)
			case tt.want != "" && !strings.Contains(got, tt.want):
				t.Errorf("CheckDSN(%q) = %q\nwant it to contain %q", tt.dsn, got, tt.want)
			}
			if strings.Contains(got, pw) {
				t.Errorf("CheckDSN(%q) shows the password: %q", tt.dsn, got)
			}
		})
	}
}

// TestParseTimeZone: the values of mysql.time_zone, the SET opctl sends and
// the zone its DATETIMEs are read in.
func TestParseTimeZone(t *testing.T) {
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Skipf("no tz database on this machine: %v", err)
	}
	at := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in      string
		set     string
		offset  int  // of Loc at `at`, seconds
		noLoc   bool // the server says
		problem string
	}{
		{in: "", noLoc: true},
		{in: "SYSTEM", set: "'SYSTEM'", noLoc: true},
		{in: "system", set: "'SYSTEM'", noLoc: true},
		{in: "UTC", set: "'+00:00'", offset: 0},
		{in: "+08:00", set: "'+08:00'", offset: 8 * 3600},
		{in: "-08:00", set: "'-08:00'", offset: -8 * 3600},
		{in: "+5:30", set: "'+05:30'", offset: 5*3600 + 1800},
		{in: "+14:00", set: "'+14:00'", offset: 14 * 3600},
		{in: "Asia/Shanghai", set: "'Asia/Shanghai'", offset: 8 * 3600},
		{in: "Europe/Berlin", set: "'Europe/Berlin'", offset: 2 * 3600},
		{in: "+15:00", problem: "is not an offset"},
		{in: "+08:60", problem: "is not an offset"},
		{in: "+0800", problem: "is not an offset"},
		{in: "+08:00'; SET sql_mode='", problem: "is not an offset"},
		{in: "08:00", problem: "is not a time zone"},
		{in: "Local", problem: "is not a time zone"},
		{in: "'UTC'", problem: "is not a time zone"},
		{in: "Mars/Olympus", problem: "is not a time zone this machine knows"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			tz, problem := ParseTimeZone(tt.in)
			if tt.problem != "" {
				if !strings.Contains(problem, tt.problem) || tz.Set != "" || tz.Loc != nil {
					t.Fatalf("ParseTimeZone(%q) = %+v, %q; want the problem %q", tt.in, tz, problem, tt.problem)
				}
				return
			}
			if problem != "" || tz.Set != tt.set || (tz.Loc == nil) != tt.noLoc {
				t.Fatalf("ParseTimeZone(%q) = %+v, %q; want set %s, location %v", tt.in, tz, problem, tt.set, !tt.noLoc)
			}
			if tz.Loc != nil {
				if _, off := at.In(tz.Loc).Zone(); off != tt.offset {
					t.Errorf("ParseTimeZone(%q): offset %d at %v, want %d", tt.in, off, at, tt.offset)
				}
			}
		})
	}
	if tz, _ := ParseTimeZone("Asia/Shanghai"); tz.Loc.String() != shanghai.String() {
		t.Errorf("Asia/Shanghai reads as %v", tz.Loc)
	}
}

// TestTimeZoneKey: mysql.time_zone is checked when the file loads, with its
// line.
func TestTimeZoneKey(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  []wantErr
	}{
		{value: `"+08:00"`},
		{value: `SYSTEM`},
		{value: `"${OPCTL_TZ:-UTC}"`},
		{value: `"+8"`, want: []wantErr{{3, `mysql.time_zone "+8" is not an offset: want [+-]HH:MM`}}},
		{value: `Asia/Shangai`, want: []wantErr{{3, `mysql.time_zone "Asia/Shangai" is not a time zone this machine knows`}}},
	} {
		t.Run(tt.value, func(t *testing.T) {
			src := edit(t, baseYAML, map[int]string{2: `  dsn: "u:p@tcp(127.0.0.1:3306)/db"` + "\n  time_zone: " + tt.value})
			_, err := ParseWithEnv("t.yaml", []byte(src), noEnv)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			checkErrs(t, err, tt.want)
		})
	}
}

func TestDSNDatabase(t *testing.T) {
	for in, want := range map[string]string{
		"u:p@tcp(h:3306)/shop?parseTime=true": "shop",
		"u:pa/ss@tcp(h)/db":                   "db",
		"u:p@tcp(h)/my%2Ddb":                  "my-db",
		"u:p@tcp(h)/":                         "",
		"u:p@tcp(h)":                          "",
		"u:p@tcp(h)/bad%zz":                   "",
	} {
		if got := DSNDatabase(in); got != want {
			t.Errorf("DSNDatabase(%q) = %q, want %q", in, got, want)
		}
	}
}
