package mysql

import (
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/sources/config"
)

// TestCheckDSN: a DSN opctl cannot use is a configuration error with its
// fix, at load, never a driver message at the first read (or an INCOMPLETE
// verdict with READ_ERROR on every step), and never shows the password:
// the form (config.CheckDSN), then each parameter as the driver reads it.
func TestCheckDSN(t *testing.T) {
	const pw = "s3cr3t-pw"
	tests := []struct {
		name, dsn string
		want      string // "" valid; else a part of the problem
	}{
		{"tcp with port", "u:" + pw + "@tcp(127.0.0.1:3306)/db", ""},
		{"no database", "u:" + pw + "@tcp(h:3306)/", `names no database after the "/"`},
		{"parameter without a value", "u@tcp(h)/db?parseTime", `has parameter "parseTime" without a value`},
		{"bad escape of a driver parameter", "u@tcp(h)/db?loc=%zz", `has parameter "loc=%zz" that is not properly %-escaped`},
		{"maxAllowedPacket not a number", "u@tcp(h)/db?maxAllowedPacket=big", `has "maxAllowedPacket=big"; want a whole number`},
		{"bad collation", "u@tcp(h)/db?collation=utf8mb4_bin;DROP", `want a collation name`},
		{"a number", "u@tcp(h)/db?max_statement_time=1.5x", `has "max_statement_time=1.5x"; want a number`},
		{"every kind of accepted parameter",
			"u:" + pw + "@tcp(h:3306)/db?parseTime=true&loc=Asia%2FShanghai&time_zone=%27%2B08:00%27&timeout=5s&readTimeout=1m&tls=skip-verify&charset=utf8mb4,utf8&collation=utf8mb4_general_ci&maxAllowedPacket=0&max_statement_time=1.5&innodb_lock_wait_timeout=5&multiStatements=1&connectionAttributes=app%3Aopctl", ""},
		{"unknown parameter, with the accepted ones", "u:" + pw + "@tcp(h)/db?application_name=opctl", `has unknown parameter "application_name": the driver would send it to the server as a session variable; remove it (accepted: the driver's allowCleartextPasswords,`},
		{"unknown parameter names the session variables", "u@tcp(h)/db?sql_mode=ANSI", `the session variables innodb_lock_wait_timeout, lock_wait_timeout, max_execution_time, max_statement_time, time_zone)`},
		{"misspelt parameter", "u@tcp(h)/db?parsetime=true", `has unknown parameter "parsetime" (did you mean "parseTime"?)`},
		{"session variable with another case", "u@tcp(h)/db?TIME_ZONE=%27%2B08:00%27", `unknown parameter "TIME_ZONE" (did you mean "time_zone"?)`},
		{"bad bool", "u@tcp(h)/db?parseTime=yes", `has "parseTime=yes"; want true or false`},
		{"bad duration", "u@tcp(h)/db?timeout=5", `has "timeout=5"; want a duration`},
		{"bad loc", "u@tcp(h)/db?loc=Mars%2FOlympus", `has "loc=Mars%2FOlympus"; want a time zone name`},
		{"strict panics the driver", "u@tcp(h)/db?strict=true", `has parameter "strict", which opctl refuses: it was removed from go-sql-driver/mysql; remove it`},
		{"allowAllFiles", "u@tcp(h)/db?allowAllFiles=true", `"allowAllFiles", which opctl refuses: it would let the server read any file`},
		{"clientFoundRows", "u@tcp(h)/db?clientFoundRows=true", `"clientFoundRows", which opctl refuses`},
		{"columnsWithAlias", "u@tcp(h)/db?columnsWithAlias=true", `"columnsWithAlias", which opctl refuses`},
		{"a session variable's value reaches SQL only as a number", "u@tcp(h)/db?max_execution_time=1%3BDROP+TABLE+x", `has "max_execution_time=1%3BDROP+TABLE+x"; want a whole number`},
		{"charset reaches SQL only as names", "u@tcp(h)/db?charset=utf8mb4;DROP", `want charset names`},
		{"named TLS configuration", "u@tcp(h)/db?tls=custom", `opctl registers no named TLS configuration`},
		{"bad escape", "u@tcp(h)/db?time_zone=%zz", `has parameter "time_zone=%zz" that is not properly %-escaped`},
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

// The driver's parameters are the ones its FormatDSN writes: every one
// the driver documents, none of the session variables.
func TestDriverParams(t *testing.T) {
	got := strings.Join(driverParams(), ",")
	for _, want := range []string{"allowAllFiles", "allowCleartextPasswords", "charset", "collation", "compress", "interpolateParams",
		"loc", "maxAllowedPacket", "parseTime", "readTimeout", "timeTruncate", "timeout", "tls", "writeTimeout", "serverPubKey"} {
		if !strings.Contains(","+got+",", ","+want+",") {
			t.Errorf("driver parameters %s: no %s", got, want)
		}
	}
	if strings.Contains(got, "time_zone") || strings.Contains(got, "strict") {
		t.Errorf("driver parameters %s", got)
	}
}

// ValidateMySQL with the driver's check says what is wrong at the line of
// the DSN, or without a line for a DSN a flag gave.
func TestValidateMySQLWithTheDriver(t *testing.T) {
	src := "mysql:\n  dsn: \"app:hunter2@tcp(db:3306)/pay?tz=UTC\"\nkafka:\n  brokers: [\"k:9092\"]\npipelines:\n  - name: p\n    topic: t\n    group: g\n    idempotency: {table: i, key: k, biz_id: b, action: a}\n    steps: [{name: s, kind: local, evidence: \"SELECT id FROM t WHERE b = ?\"}]\n"
	c, err := config.ParseWithEnv("t.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.ValidateMySQL(CheckDSN)
	if want := `config t.yaml:2: mysql.dsn "app:***@tcp(db:3306)/pay?tz=UTC" has unknown parameter "tz"`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error = %v\nwant prefix %s", err, want)
	}
	c.MySQL.DSN = "root:hunter2@tcp(h)/db?foo=1"
	err = c.ValidateMySQL(CheckDSN)
	if want := `config: mysql.dsn "root:***@tcp(h)/db?foo=1" has unknown parameter "foo"`; err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error = %v\nwant prefix %s", err, want)
	}
}

// FuzzCheckDSN: the driver's check never panics and never shows the
// password of user:password@rest, whatever the rest.
//
//	go test -run '^$' -fuzz '^FuzzCheckDSN$' -fuzztime 1m -parallel 1 ./sources/mysql/
func FuzzCheckDSN(f *testing.F) {
	for _, s := range [][2]string{
		{"tcp(127.0.0.1:3306)/db", "s3cret-pw"},
		{"tcp(db:3306)/pay?parseTime=true&loc=Asia%2FShanghai", "p@ss/word:x"},
		{"tcp(h)/db?timeout=5&tls=custom&charset=a;b", "hunter22"},
		{"/db?readTimeout=-1s&sql_mode=x&max_execution_time=1%3B", "pa$$w0rd"},
		{"unix(/s)/d%zz?x", "\x00\x1b[31m"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, rest, password string) {
		_ = CheckDSN(rest)
		if len(password) < 6 || strings.ContainsAny(password, "@/") || strings.Contains(rest, password) {
			return
		}
		if p := CheckDSN("app:" + password + "@" + rest); strings.Contains(p, password) &&
			!strings.Contains(CheckDSN("app:"+strings.Repeat("#", len(password))+"@"+rest), password) {
			t.Errorf("CheckDSN shows the password %q: %s", password, p)
		}
	})
}
