package config

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/sources/config/yamlfile"
)

// Every configuration in the tree loads under the limits, and nests
// deeply enough that the depth measured is the one documented.
func TestNestingOfShippedConfigs(t *testing.T) {
	var files []string
	for _, g := range []string{"../../testdata/config/*.yaml", "../../testdata/repair/*.yaml", "presets/*.yaml", "../../lab/opctl.yaml.tmpl"} {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 8 {
		t.Fatalf("found %d configurations", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			root, perr := yamlfile.Parse(renderTemplate(data))
			if perr != nil {
				t.Fatal(perr)
			}
			if d := treeDepth(root); d < 4 || d > MaxNesting {
				t.Errorf("depth %d", d)
			}
		})
	}
}

// treeDepth counts the mappings and lists nested in n.
func treeDepth(n *yamlfile.Node) int {
	if n.Kind != yamlfile.MappingNode && n.Kind != yamlfile.SequenceNode {
		return 0
	}
	m := 0
	for _, c := range n.Content {
		m = max(m, treeDepth(c))
	}
	return 1 + m
}

// renderTemplate fills the {{...}} of lab/opctl.yaml.tmpl with values of
// the same shape.
func renderTemplate(data []byte) []byte {
	s := string(data)
	for {
		i := strings.Index(s, "{{")
		j := strings.Index(s, "}}")
		if i < 0 || j < i {
			return []byte(s)
		}
		v := "http://127.0.0.1:1"
		if strings.Contains(s[i:j], "Brokers") {
			v = `"127.0.0.1:9092"`
		}
		s = s[:i] + v + s[j+2:]
	}
}

// deepFiles are files nested 40,000 levels deep in each way YAML nests
// (1,000 for flow lists spanning lines, where the parser's own stop at
// 10,000 levels would be far from level 65), and the line where the 65th
// level opens.
func deepFiles() []struct {
	name string
	src  []byte
	line int
} {
	const n = 40000
	var block strings.Builder
	block.WriteString("x-deep:\n")
	for i := 1; i < 200; i++ { // indentation: 200 levels take 20 KB
		block.WriteString(strings.Repeat(" ", i) + "a:\n")
	}
	return []struct {
		name string
		src  []byte
		line int
	}{
		{"flow lists", []byte("mysql: {dsn: x}\nx-deep: " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n"), 2},
		{"flow mappings", []byte("x-deep: " + strings.Repeat("{a: ", n) + "1" + strings.Repeat("}", n) + "\n"), 1},
		{"compact lists", []byte("x-deep:\n" + strings.Repeat("- ", n) + "x\n"), 2},
		{"indentation", []byte(block.String()), 65},
		{"lists of lists spanning lines", []byte("x-deep: [\n" + strings.Repeat(" [\n", 1000) + strings.Repeat(" ]\n", 1000) + "]\n"), 64},
	}
}

func TestDeepFileRefusedBeforeParsing(t *testing.T) {
	for _, f := range deepFiles() {
		t.Run(f.name, func(t *testing.T) {
			_, err := ParseWithEnv("deep.yaml", f.src, noEnv)
			var list ErrorList
			if !errors.As(err, &list) || len(list) != 1 || list[0].Line != f.line ||
				!strings.Contains(err.Error(), "nests deeper than 64 levels") {
				t.Fatalf("err = %v; want one error at line %d", err, f.line)
			}
			// Refused in memory linear in the file: the parser stops at
			// 10,000 levels by itself (goccy's parser, before, took 4.1 GB
			// for the 40,000-deep file).
			if n := allocatedBytes(func() { _, _ = ParseWithEnv("deep.yaml", f.src, noEnv) }); n > 16<<20 {
				t.Errorf("%d bytes allocated to refuse it; want at most 16 MiB", n)
			}
		})
	}
}

func TestFileOver1MiBRefusedBeforeReading(t *testing.T) {
	big := append([]byte("mysql: {dsn: x}\n# "), strings.Repeat("x", 2<<20)...)
	path := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(path, big, 0o600); err != nil {
		t.Fatal(err)
	}
	exact := append([]byte("# "), strings.Repeat("x", MaxFileSize-2)...) // 1 MiB of comment: read, then "only comments"
	tests := []struct {
		name  string
		parse func() error
		want  string
	}{
		{"Parse", func() error { _, err := ParseWithEnv("big.yaml", big, noEnv); return err },
			"config big.yaml: the file holds 2.0 MiB (2097170 bytes); a configuration may be at most 1 MiB (1048576 bytes): is this the right file?"},
		{"Load", func() error { _, err := Load(path); return err },
			"config " + path + ": the file holds 2.0 MiB (2097170 bytes); a configuration may be at most 1 MiB (1048576 bytes): is this the right file?"},
		{"exactly 1 MiB is read", func() error { _, err := ParseWithEnv("one.yaml", exact, noEnv); return err },
			"config one.yaml: the file holds no configuration (only comments)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.parse()
			if err == nil || err.Error() != tt.want {
				t.Fatalf("err = %v\nwant  %s", err, tt.want)
			}
			if tt.name == "exactly 1 MiB is read" {
				return
			}
			if n := allocatedBytes(func() { _ = tt.parse() }); n > 16<<10 {
				t.Errorf("%d bytes allocated to refuse it; want at most 16 KiB", n)
			}
		})
	}
}

// allocatedBytes is what one call of f allocates, the mean of 3 calls.
func allocatedBytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 3 {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / 3
}

func BenchmarkRefuseDeepFile(b *testing.B) {
	for _, f := range deepFiles() {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = ParseWithEnv("deep.yaml", f.src, noEnv)
			}
		})
	}
}
