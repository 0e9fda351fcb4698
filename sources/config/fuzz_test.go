package config

// Fuzz targets for what opctl reads from the operator's files and flags: a
// configuration may come from anywhere (a generated file, the wrong file),
// so no input may make opctl panic, and every refusal must be a clear,
// printable error. The seeds (f.Add) and the files under
// testdata/fuzz/FuzzXxx run as ordinary tests with `go test`; a crasher
// `go test -fuzz` writes there becomes a regression test.
//
//	go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 3m -parallel 1 ./sources/config/
//	go test -run '^$' -fuzz '^FuzzDSN$' -fuzztime 3m -parallel 1 ./sources/config/
//	go test -run '^$' -fuzz '^FuzzNesting$' -fuzztime 3m -parallel 1 ./sources/config/

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// rawControl is the first raw control character (or invalid UTF-8 byte)
// of s, or -1.
func rawControl(s string) rune {
	for i, r := range s {
		if r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") || unicode.IsControl(r) {
			return r
		}
	}
	return -1
}

// checkErrorList asserts what every error of Parse, Validate, ValidateKafka
// and ValidateMySQL is: a non-empty ErrorList of non-empty messages, one
// line each, with no raw control character.
func checkErrorList(t *testing.T, what string, err error) {
	t.Helper()
	var list ErrorList
	if !errors.As(err, &list) || len(list) == 0 {
		t.Fatalf("%s: error %T %v is not a non-empty ErrorList", what, err, err)
	}
	for _, e := range list {
		if e == nil || strings.TrimSpace(e.Msg) == "" {
			t.Fatalf("%s: an empty message in %q", what, err)
		}
		if r := rawControl(e.Error()); r >= 0 {
			t.Errorf("%s: message with a raw control character %U: %q", what, r, e.Error())
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(baseYAML))
	f.Add([]byte("\ufeff" + baseYAML))
	f.Add([]byte(strings.ReplaceAll(baseYAML, "\n", "\r\n")))
	for _, g := range []string{"../../testdata/config/*.yaml", "presets/*.yaml"} {
		files, _ := filepath.Glob(g)
		for _, p := range files {
			if data, err := os.ReadFile(p); err == nil {
				f.Add(data)
			}
		}
	}
	// A secret the environment holds never shows in an error, wherever a
	// ${SECRET_DSN} puts it (the file itself does not hold it).
	const secret = "Fz-S3cret"
	env := envMap(map[string]string{"OPCTL_MYSQL_DSN": "u:p@tcp(db:3306)/pay", "OPCTL_BROKERS": "k1:9092,k2:9092", "X": "${Y}", "NL": "a\nb",
		"SECRET_DSN": "app:" + secret + "@tcp(db:3306)/pay"})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseWithEnv("fuzz.yaml", data, env)
		if err != nil {
			checkErrorList(t, "Parse", err)
			if !strings.Contains(string(data), secret) && strings.Contains(err.Error(), secret) {
				t.Errorf("an error shows the password of $SECRET_DSN: %q", err)
			}
			for _, e := range err.(ErrorList) {
				if e.File != "fuzz.yaml" {
					t.Errorf("error without the file name: %q", e.Error())
				}
			}
			return
		}
		if c == nil || len(c.Pipelines) == 0 {
			t.Fatalf("no error and no pipelines: %+v", c)
		}
		for _, check := range []struct {
			name string
			fn   func() error
		}{{"ValidateKafka", c.ValidateKafka}, {"ValidateMySQL", func() error { return c.ValidateMySQL() }}, {"Validate again", c.Validate}} {
			if err := check.fn(); err != nil {
				checkErrorList(t, check.name, err)
				if check.name == "Validate again" {
					t.Errorf("a loaded configuration does not validate again: %v", err)
				}
			}
		}
	})
}

// FuzzDSN: the DSN, time zone and broker checks never panic, say what is
// wrong in printable messages, and never show a DSN's password.
func FuzzDSN(f *testing.F) {
	for _, s := range [][5]string{
		{"u:p@tcp(127.0.0.1:3306)/db", "", "", "127.0.0.1:9092", "s3cret-pw"},
		{"app:pa$$w@rd@tcp(db:3306)/pay?parseTime=true&loc=Asia%2FShanghai", "w:x@unix(/tmp/s)/pay", "+08:00", "a:9092,b:9093", "p@ss/word:x"},
		{"mysql://u:p@h/db", "u@tcp/db?timeout=5s", "Asia/Shanghai", "[::1]:9092,host", "tcp(db:3306)/x"},
		{"u:p@tcp(h:99999)/", "u:p@/db?readTimeout=-1s", "SYSTEM", ":9092,h:0,h:x", ""},
		{"\x00:\x1b@tcp(\n)/\t?a=\x7f", "", "-14:60", "\x1b[31m:1", "\u0085\u202e"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	f.Fuzz(func(t *testing.T, dsn, writeDSN, zone, brokers, password string) {
		_ = RedactDSN(dsn)
		_ = CheckDSN(dsn)
		_, _ = ParseTimeZone(zone)
		for _, b := range strings.Split(brokers, ",") {
			_ = checkHostPort(b)
		}
		c := &Config{
			MySQL: MySQL{DSN: dsn, WriteDSN: writeDSN, TimeZone: zone},
			Kafka: Kafka{Brokers: strings.Split(brokers, ","), SASL: &SASL{Mechanism: "PLAIN", User: "u", Password: password}},
		}
		if err := c.ValidateMySQL(); err != nil {
			checkErrorList(t, "ValidateMySQL", err)
		}
		if err := c.ValidateKafka(); err != nil {
			checkErrorList(t, "ValidateKafka", err)
		}

		// The password of user:password@rest never shows: neither in
		// RedactDSN nor in the messages (unless the message would hold
		// that text with any other password).
		if len(password) < 6 || strings.ContainsAny(password, "@/") || strings.Contains(dsn, password) {
			return
		}
		secret := "app:" + password + "@" + dsn
		other := "app:" + strings.Repeat("#", len(password)) + "@" + dsn
		if r := RedactDSN(secret); strings.Contains(r, password) {
			t.Errorf("RedactDSN(%q) = %q shows the password", secret, r)
		}
		msg := func(d string) string {
			c := &Config{MySQL: MySQL{DSN: d, WriteDSN: d}}
			if err := c.ValidateMySQL(); err != nil {
				return err.Error()
			}
			return ""
		}
		if m := msg(secret); strings.Contains(m, password) && !strings.Contains(msg(other), password) {
			t.Errorf("ValidateMySQL of %q shows the password: %s", secret, m)
		}
	})
}
