package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// unsetenv unsets key for the duration of the test (t.Setenv restores it).
func unsetenv(t *testing.T, key string) {
	t.Helper()
	t.Setenv(key, "")
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFind(t *testing.T) {
	type setup struct {
		flag, env        string // "" = not given
		local, xdg, home bool   // which files exist
		xdgVar           string // "abs" = a temp dir, "rel" = a relative path, "" = unset
		want             string // "flag", "env", "local", "xdg", "home"
		wantErr          string
		wantNotFound     bool
	}
	tests := []struct {
		name string
		s    setup
	}{
		{"--config wins over everything", setup{flag: "flag.yaml", env: "env.yaml", local: true, xdg: true, xdgVar: "abs", want: "flag"}},
		{"$OPCTL_CONFIG before ./opctl.yaml", setup{env: "env.yaml", local: true, xdg: true, xdgVar: "abs", want: "env"}},
		{"./opctl.yaml before XDG", setup{local: true, xdg: true, xdgVar: "abs", want: "local"}},
		{"$XDG_CONFIG_HOME/opctl/config.yaml", setup{xdg: true, xdgVar: "abs", want: "xdg"}},
		{"XDG defaults to ~/.config", setup{home: true, want: "home"}},
		{"a relative XDG_CONFIG_HOME is ignored", setup{home: true, xdgVar: "rel", want: "home"}},
		{"missing --config does not fall through", setup{flag: "missing.yaml", local: true, wantErr: "--config missing.yaml"}},
		{"missing $OPCTL_CONFIG does not fall through", setup{env: "missing.yaml", local: true, wantErr: "$OPCTL_CONFIG="}},
		{"nothing found", setup{wantNotFound: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.s
			work, xdg, home := t.TempDir(), t.TempDir(), t.TempDir()
			t.Chdir(work)
			t.Setenv("HOME", home)
			unsetenv(t, EnvConfig)
			unsetenv(t, "XDG_CONFIG_HOME")
			switch s.xdgVar {
			case "abs":
				t.Setenv("XDG_CONFIG_HOME", xdg)
			case "rel":
				t.Setenv("XDG_CONFIG_HOME", "relative/dir")
				writeFile(t, filepath.Join(work, "relative/dir/opctl/config.yaml"), "x")
			}
			paths := map[string]string{
				"flag":  filepath.Join(work, "flag.yaml"),
				"env":   filepath.Join(work, "env.yaml"),
				"local": "opctl.yaml",
				"xdg":   filepath.Join(xdg, "opctl", "config.yaml"),
				"home":  filepath.Join(home, ".config", "opctl", "config.yaml"),
			}
			if s.flag == "flag.yaml" {
				writeFile(t, paths["flag"], "x")
			}
			if s.env == "env.yaml" {
				writeFile(t, paths["env"], "x")
			}
			if s.env != "" {
				t.Setenv(EnvConfig, s.env)
			}
			if s.local {
				writeFile(t, filepath.Join(work, "opctl.yaml"), "x")
			}
			if s.xdg {
				writeFile(t, paths["xdg"], "x")
			}
			if s.home {
				writeFile(t, paths["home"], "x")
			}

			got, err := Find(s.flag)
			switch {
			case s.wantNotFound:
				var nf *NotFoundError
				if !errors.As(err, &nf) || !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("err = %v, want a NotFoundError", err)
				}
				msg := err.Error()
				for _, w := range []string{"--config (not given)", "$OPCTL_CONFIG (not set)", "./opctl.yaml (not found)",
					paths["home"] + " (not found)", "opctl init --preset settlement", "--config FILE"} {
					if !strings.Contains(msg, w) {
						t.Errorf("message lacks %q:\n%s", w, msg)
					}
				}
			case s.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), s.wantErr) || !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("err = %v, want one mentioning %q", err, s.wantErr)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				want := paths[s.want]
				if s.want == "flag" {
					want = s.flag
				}
				if s.want == "env" {
					want = s.env
				}
				if got != want {
					t.Errorf("Find = %q, want %q", got, want)
				}
			}
		})
	}
}

func TestFindRejectsDirectory(t *testing.T) {
	dir := t.TempDir()
	if _, err := Find(dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("err = %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	unsetenv(t, EnvConfig)
	t.Setenv("OPCTL_MYSQL_DSN", "u:pw@tcp(db:3306)/pay")
	writeFile(t, filepath.Join(dir, "opctl.yaml"), edit(t, baseYAML, map[int]string{2: `  dsn: "${OPCTL_MYSQL_DSN}"`}))

	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != "opctl.yaml" || c.MySQL.DSN != "u:pw@tcp(db:3306)/pay" {
		t.Errorf("Path %q DSN %q", c.Path, c.MySQL.DSN)
	}

	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, edit(t, baseYAML, map[int]string{18: `      stauts: status`}))
	_, err = Load(bad)
	want := "config " + bad + `:18: unknown key "stauts" (did you mean "status"?)`
	if err == nil || err.Error() != want {
		t.Errorf("Load(bad) = %v\nwant %s", err, want)
	}
	if e := c.Errorf("pipelines[0].state.table", "table %s is missing", "x"); e.Error() != "config opctl.yaml:16: table x is missing" {
		t.Errorf("Errorf = %q", e)
	}
}

// The example configs shipped in testdata must load with no environment.
func TestExampleConfigs(t *testing.T) {
	files, err := filepath.Glob("../../testdata/config/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("found %d example configs, want at least 3", len(files))
	}
	for _, f := range []string{"OPCTL_MYSQL_DSN", "OPCTL_BROKERS", "OPCTL_WMS_URL", EnvConfig} {
		unsetenv(t, f)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Pipelines) == 0 {
				t.Fatal("no pipelines")
			}
			if err := c.ValidateKafka(); err != nil {
				t.Errorf("ValidateKafka: %v", err)
			}
			if !slices.Equal(c.Kafka.Brokers, []string{"127.0.0.1:9092"}) {
				t.Errorf("brokers = %q", c.Kafka.Brokers)
			}
			err = c.ValidateMySQL()
			if err == nil || !strings.Contains(err.Error(), "mysql.dsn is empty: $OPCTL_MYSQL_DSN is not set") {
				t.Errorf("ValidateMySQL = %v", err)
			}
			if !slices.Equal(c.UnsetVars(), []string{"OPCTL_MYSQL_DSN"}) {
				t.Errorf("UnsetVars = %q", c.UnsetVars())
			}
		})
	}
}

func TestFulfilmentExample(t *testing.T) {
	data, err := os.ReadFile("../../testdata/config/fulfilment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseWithEnv("fulfilment.yaml", data, envMap(map[string]string{"OPCTL_WMS_URL": "https://wms.internal"}))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Pipeline("fulfilment").Steps[1]
	if s.Probe != "https://wms.internal/wms/locks?biz_id={biz_id}" || !slices.Equal(s.ProbeAbsent, []string{"NOT_FOUND"}) {
		t.Errorf("wms_lock = %+v", s)
	}
}

// BenchmarkParseConfig: the load of the shipped configurations, the cost
// every command pays at its start (docs/performance.md).
func BenchmarkParseConfig(b *testing.B) {
	files, _ := filepath.Glob("../../testdata/config/*.yaml")
	if len(files) == 0 {
		b.Fatal("no configurations")
	}
	var data [][]byte
	for _, f := range files {
		d, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		data = append(data, d)
	}
	env := func(string) (string, bool) { return "u:p@tcp(127.0.0.1:3306)/db", true }
	b.ReportAllocs()
	for b.Loop() {
		for _, d := range data {
			_, _ = ParseWithEnv("opctl.yaml", d, env)
		}
	}
}
