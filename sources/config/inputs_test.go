package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestErrorsNeverQuoteASecret: a DSN-shaped value is redacted wherever a
// configuration error would quote it — a DSN written where a mapping or a
// key belongs, a value of another key, one a ${VAR} brought from the
// environment — and the rest of the message is kept. (A DSN written
// directly under mysql: printed its password.)
func TestErrorsNeverQuoteASecret(t *testing.T) {
	env := envMap(map[string]string{"SECRET_DSN": "app:Env-pw9@tcp(db:3306)/pay"})
	for _, tc := range []struct {
		name, src, secret, want string
	}{
		{"a DSN as mysql's value", "mysql: \"root:S3cret-pw@tcp(db:3306)/app\"\n", "S3cret-pw",
			`config t.yaml:1: mysql: expected a mapping (key: value), found the string "root:***@tcp(db:3306)/app"`},
		{"a URL DSN as mysql's value", "mysql: mysql://root:S3cret-pw@db:3306/app\n", "S3cret-pw", `"mysql://root:***@db:3306/app"`},
		{"a DSN as a key", "mysql:\n  root:S3cret-pw@tcp(db:3306)/app: 1\n", "S3cret-pw", `unknown key "root:***@tcp(db:3306)/app" under mysql`},
		{"a password with spaces and quotes", "mysql: 'root:my \"pw\" S3cret@tcp(db:3306)/app'\n", "S3cret", `"root:***@tcp(db:3306)/app"`},
		{"a DSN as another key's value", edit(t, baseYAML, map[int]string{2: "  dsn: x\n  time_zone: \"root:S3cret-pw@tcp(db:3306)/app\""}), "S3cret-pw",
			`mysql.time_zone "root:***@tcp(db:3306)/app" is not a time zone`},
		{"a DSN from the environment, within a value", edit(t, baseYAML, map[int]string{2: "  dsn: x\n  time_zone: \"at ${SECRET_DSN} now\""}), "Env-pw9",
			`mysql.time_zone "at app:***@tcp(db:3306)/pay now" is not a time zone`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseWithEnv("t.yaml", []byte(tc.src), env)
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), tc.secret) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant it to hold %s and not %q", err, tc.want, tc.secret)
			}
		})
	}
	// What is not a DSN is kept as written: a reverse statement's :names
	// next to an @ (SQL) and an address without a password.
	for _, s := range []string{
		`bind :delta WHERE x = @v / 2`, `"ro@tcp(db:3306)/pay"`, `"a@b"`, "no at sign: x",
	} {
		if got := redactSecrets(s); got != s {
			t.Errorf("redactSecrets(%q) = %q, want it unchanged", s, got)
		}
	}
}

// TestNotAConfigurationIsNamedNotPrinted: a file that is not a
// configuration (the environment of a process, a binary) is named, never
// quoted. (OPCTL_CONFIG=/proc/self/environ printed the environment.)
func TestNotAConfigurationIsNamedNotPrinted(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"an environment", "HOME=/root\x00DB_PASSWORD=S3cret-pw\x00PATH=/bin\x00", "the file holds a single value, not a configuration"},
		{"one line", "DB_PASSWORD=S3cret-pw\n", "the file holds a single value, not a configuration"},
		{"a list", "- DB_PASSWORD=S3cret-pw\n- b\n", "the file holds a list, not a configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "environ")
			if err := os.WriteFile(path, []byte(tc.src), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil || strings.Contains(err.Error(), "S3cret") || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("err = %v", err)
			}
		})
	}
	if _, err := os.Stat("/proc/self/environ"); err == nil {
		t.Setenv("OPCTL_TEST_SECRET", "S3cret-pw")
		_, err := Load("/proc/self/environ")
		if err == nil || strings.Contains(err.Error(), "S3cret") || strings.Contains(err.Error(), "PATH=") {
			t.Errorf("/proc/self/environ: %v", err)
		}
	}
}

// keysFile is a configuration of size bytes (about) whose x- keys sit in
// mappings of perMapping keys, nested as deep as it takes.
func keysFile(size, perMapping int) []byte {
	var b strings.Builder
	b.WriteString(baseYAML)
	for i := 0; b.Len() < size-64; i++ {
		if perMapping < MaxKeys {
			if i%(perMapping*perMapping) == 0 {
				fmt.Fprintf(&b, "x-a%d:\n", i)
			}
			if i%perMapping == 0 {
				fmt.Fprintf(&b, "  x-m%d:\n", i)
			}
			fmt.Fprintf(&b, "    x-%d: 1\n", i)
		} else {
			fmt.Fprintf(&b, "x-%d: 1\n", i)
		}
	}
	return []byte(b.String())
}

// TestWideMappingRefusedBeforeParsing: a block mapping of more than
// MaxKeys keys is refused at the key that goes over, before the YAML
// parser (whose cost grows with the square of a mapping's keys) sees it.
// (One mapping of 96,000 legal x- keys, inside 1 MiB, cost every command
// 23 s and 386 MB.) A file of as many keys in narrower mappings loads.
func TestWideMappingRefusedBeforeParsing(t *testing.T) {
	wide := keysFile(MaxFileSize, 1<<20)
	_, err := ParseWithEnv("keys.yaml", wide, noEnv)
	var list ErrorList
	// baseYAML's top-level keys (mysql, kafka, pipelines) count too.
	if line := strings.Count(baseYAML, "\n") + MaxKeys - 3; !errors.As(err, &list) || len(list) != 1 || list[0].Line != line ||
		err.Error() != fmt.Sprintf("config keys.yaml:%d: the file has a mapping of more than 256 keys here; opctl refuses it without parsing it: is this the right file?", line) {
		t.Fatalf("err = %v, want one error at line %d", err, line)
	}
	// The parse is linear in the file: 1 MiB of keys at most (goccy's
	// parser, before, took 23 s and 386 MB for one mapping of 96,000).
	if n := allocatedBytes(func() { _, _ = ParseWithEnv("keys.yaml", wide, noEnv) }); n > 128<<20 {
		t.Errorf("%d bytes allocated to refuse it; want at most 128 MiB", n)
	}
	// The line is the 257th key's, wherever the mapping is.
	for _, tc := range []struct {
		name string
		src  string
		line int
	}{
		{"top level", strings.Repeat("x-k: 1\n", 300), 257},
		{"nested", "x-a:\n" + strings.Repeat("  k: 1\n", 300), 258},
		{"keys with nested values", "x-a:\n" + strings.Repeat("  k:\n    v: 1\n", 300), 2 + 2*256},
		{"after a list value", "x-a:\n- 1\n" + strings.Repeat("k: 1\n", 300), 258},
	} {
		_, err := ParseWithEnv("t.yaml", []byte(tc.src), noEnv)
		if !errors.As(err, &list) || list[0].Line != tc.line || !strings.Contains(err.Error(), "more than 256 keys") {
			t.Errorf("%s: err = %v, want line %d", tc.name, err, tc.line)
		}
	}
	// 256 keys, lists and flow mappings of any length load.
	var flow strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&flow, "k%d: 1, ", i)
	}
	if _, err := ParseWithEnv("t.yaml", []byte(baseYAML+"x-l:\n"+strings.Repeat("- 1\n", 5000)+"x-f: {"+flow.String()+"b: 2}\n"), noEnv); err != nil {
		t.Errorf("a long list and a long flow mapping: %v", err)
	}
	var b strings.Builder
	b.WriteString(baseYAML + "x-m:\n")
	for i := range MaxKeys {
		fmt.Fprintf(&b, "  k%d: 1\n", i)
	}
	if _, err := ParseWithEnv("t.yaml", []byte(b.String()), noEnv); err != nil {
		t.Errorf("256 keys: %v", err)
	}
	if _, err := ParseWithEnv("keys.yaml", keysFile(MaxFileSize, 200), noEnv); err != nil {
		t.Errorf("1 MiB of keys in mappings of 200: %v", err)
	}
}

// BenchmarkParseKeys: 1 MiB of x- keys, refused (one mapping) or parsed
// (mappings of 200 keys): the cost of every command's start with such a
// file (docs/config.md; the figures are in the commit that added it).
func BenchmarkParseKeys(b *testing.B) {
	for _, tc := range []struct {
		name string
		per  int
	}{{"one mapping", 1 << 20}, {"mappings of 200", 200}} {
		data := keysFile(MaxFileSize, tc.per)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				_, _ = ParseWithEnv("keys.yaml", data, noEnv)
			}
		})
	}
}

// TestSpecialFilesRefused: a configuration that is a named pipe, a device
// or a directory is refused at once, never waited on. (A FIFO hung forever
// and ignored SIGINT and SIGTERM.)
func TestSpecialFilesRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "opctl.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{fifo, "is a named pipe (FIFO), not a regular file"},
		{os.DevNull, "is a device, not a regular file"},
		{"/dev/zero", "is a device, not a regular file"},
	} {
		done := make(chan error, 1)
		go func() { _, err := Load(tc.path); done <- err }()
		select {
		case err := <-done:
			var nr *NotRegularError
			if !errors.As(err, &nr) || !strings.Contains(err.Error(), tc.path+" "+tc.want) {
				t.Errorf("Load(%s): %v", tc.path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Load(%s) still waits after 10s: the open blocks", tc.path)
		}
	}
	// A symlink to a regular file is read.
	link := filepath.Join(dir, "link.yaml")
	real := filepath.Join(dir, "real.yaml")
	if err := os.WriteFile(real, []byte(baseYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(link); err != nil {
		t.Errorf("a symlink to a file: %v", err)
	}
}
