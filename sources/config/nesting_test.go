package config

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// depthOf is the depth nesting measures: the smallest limit it accepts.
func depthOf(t testing.TB, data []byte) int {
	t.Helper()
	for d := 0; d <= 1000; d++ {
		if nesting(data, d) == 0 {
			return d
		}
	}
	t.Fatalf("depth over 1000: %q", data)
	return 0
}

func TestNestingDepth(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want int
	}{
		{"scalar", "a", 0},
		{"one key", "a: b\n", 1},
		{"nested keys", "a:\n  b:\n    c: d\n", 3},
		{"siblings", "a: 1\nb: 2\nc:\n  d: 3\n", 2},
		{"list as the value of a key at its column", "a:\n- b\n- c\n", 2},
		{"list of mappings", "a:\n  - b: 1\n    c: 2\n  - d: 3\n", 3},
		{"keys after a list at their column", "a:\n- x\nb:\n- y\nc: 1\n", 2},
		{"a key as the value of an empty list item at its column", "-\n0:\n-\n1:\n", 4},
		{"empty items and keys alternating", "a:\n-\n0:\n-\n1:\n", 5},
		{"a list item with a value, then a key", "- a\nb: 1\n", 1},
		{"a tag alone on its line takes the next node", "0: !t\n0: !t # c\n\n0: !t\n0: x\n", 4},
		{"a tagged mapping ends at a sibling of its keys", "0: !t\n0: 1\n0: !t\n0: 1\n", 3},
		{"a tag takes a less indented node", "a:\n  b: !t\nc:\n  d: !t\ne: 1\n", 5},
		{"tagged list items", "- !t\n- !t\n- x\n", 3},
		{"a key after an empty alias is placed at the alias", "* 0:\n  1: 2\n", 2},
		{"a key after an anchor", "&a 0: 1\n1: 2\n", 1},
		{"a tag with a value on its line", "a: !t x\nb: !t [1]\nc: !t\n  d\ne: 1\n", 2},
		{"compact lists", "- - - a\n", 3},
		{"flow list", "a: [1, [2, [3]]]\n", 4},
		{"flow mapping", "a: {b: {c: 1}}\n", 3},
		{"flow spanning lines", "a: [\n  1,\n  [2],\n]\nb: 1\n", 3},
		{"brackets in a double-quoted string", `a: "[[[[{{{{"` + "\n", 1},
		{"brackets in a single-quoted string", "a: '[[[[ it''s [[['\n", 1},
		{"brackets in a string spanning lines", "a: \"[[[\n  [[[\"\nb: 1\n", 1},
		{"escaped quote", `a: "x\" [[[["` + "\n", 1},
		{"a \\x escape takes two more runes", `a: ["\x"a", [[1]]]` + "\n", 4},
		{"brackets in a comment", "a: 1 # [[[[ {{{\n# [[[[\n", 1},
		{"brackets in plain text", "a: x[[[ {{ ]\nb: http://h/?a[0]=1\n", 1},
		{"quotes in plain text", "a: it's [[[\nb: 1\n", 1},
		{"hash in plain text", "a: x#[[[\n", 1},
		{"brackets in a flow list after plain text", "a: [x[[1]]]\n", 4},
		{"literal block", "a: |\n  [[[[\n  - - - -\n  b: c\nd: 1\n", 1},
		{"folded block after a list item", "- >-\n  SELECT [[[[\n  - - -\n- b\n", 1},
		{"block with an indentation indicator", "a: |2\n    [[[[\nb: 1\n", 1},
		{"multi-line plain text", "a: b\n  - c\n  [[[[\nd: 1\n", 1},
		{"anchor, tag and alias", "x-a: &a !!map {b: [1]}\nc: *a\n", 3},
		{"merge key", "a:\n  <<: {b: 1}\n", 3},
		{"complex key", "? [a]\n: b\n", 2}, // the parser nests 1
		{"second document", "a:\n  b: 1\n---\nc: 1\n", 2},
		{"CRLF", "a:\r\n  b:\r\n    c: 1\r\n", 3},
		{"quoted key", "\"a\":\n  'b': [1]\n", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := depthOf(t, []byte(tt.src)); got != tt.want {
				t.Errorf("depth %d, want %d:\n%s", got, tt.want, tt.src)
			}
			if o := parserDepth([]byte(tt.src)); o > tt.want {
				t.Errorf("the parser nests %d deep, more than the %d wanted", o, tt.want)
			}
		})
	}
}

// The depth of every configuration in the tree is measured as the parser
// builds it, so the 64-level limit is the one documented.
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
			data = renderTemplate(data)
			got, want := depthOf(t, data), parserDepth(data)
			if got != want || got < 4 {
				t.Errorf("depth %d; the parser nests %d", got, want)
			}
		})
	}
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

// deepFiles are files nested 40,000 levels deep in each way YAML nests,
// and the line where the 65th level opens.
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
		{"lists of lists spanning lines", []byte("x-deep:\n" + strings.Repeat("- [\n", n) + strings.Repeat("]\n", n)), 64},
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
			// Refused without parsing: a parse allocates for every token,
			// and the 40,000-deep file took 4.1 GB.
			allocs := testing.AllocsPerRun(3, func() { _, _ = ParseWithEnv("deep.yaml", f.src, noEnv) })
			if allocs > 20 {
				t.Errorf("%v allocations to refuse it; want at most 20", allocs)
			}
			if n := allocatedBytes(func() { _, _ = ParseWithEnv("deep.yaml", f.src, noEnv) }); n > 16<<10 {
				t.Errorf("%d bytes allocated to refuse it; want at most 16 KiB", n)
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

// parserDepth is how deeply goccy's parser nests data: the flow collections
// its tokenizer opens (when it tokenizes data without error: else the
// parser refuses it at once) and the collections of the tree it builds
// (when it parses data).
func parserDepth(data []byte) int {
	d := 0
	tokens := lexer.Tokenize(string(data))
	if tokens.InvalidToken() == nil {
		open := 0
		for _, tk := range tokens {
			switch tk.Type {
			case token.SequenceStartType, token.MappingStartType:
				open++
				d = max(d, open)
			case token.SequenceEndType, token.MappingEndType:
				open = max(open-1, 0)
			}
		}
	}
	if f, err := parser.ParseBytes(data, 0); err == nil {
		for _, doc := range f.Docs {
			d = max(d, astDepth(doc))
		}
	}
	return d
}

// astDepth counts the mappings and lists nested in n.
func astDepth(n ast.Node) int {
	switch x := n.(type) {
	case *ast.DocumentNode:
		if x != nil {
			return astDepth(x.Body)
		}
	case *ast.MappingNode:
		if x != nil {
			m := 0
			for _, v := range x.Values {
				if v != nil {
					m = max(m, astDepth(v.Key), astDepth(v.Value))
				}
			}
			return 1 + m
		}
	case *ast.MappingValueNode:
		if x != nil {
			return 1 + max(astDepth(x.Key), astDepth(x.Value))
		}
	case *ast.SequenceNode:
		if x != nil {
			m := 0
			for _, v := range x.Values {
				m = max(m, astDepth(v))
			}
			return 1 + m
		}
	case *ast.TagNode:
		if x != nil {
			return astDepth(x.Value)
		}
	case *ast.AnchorNode:
		if x != nil {
			return astDepth(x.Value)
		}
	case *ast.MappingKeyNode:
		if x != nil {
			return astDepth(x.Value)
		}
	}
	return 0
}

// FuzzNesting: for any input, nesting measures at least the depth goccy's
// tokenizer and parser reach, so that no file the pre-scan lets through
// can make the parser nest deeper than 64 levels.
//
//	go test -run '^$' -fuzz '^FuzzNesting$' -fuzztime 3m -parallel 1 ./sources/config/
func FuzzNesting(f *testing.F) {
	for _, s := range []string{baseYAML, "a: [1, {b: [2]}]\n", "a: \"[[\"\n", "- - a\n", "a: |\n  [[\nb: 1\n", "a: b\n  [c\n", "? [a]\n: b\n",
		"a: \"\\x\"[\" [[\n", "{a: b: [c]}\n", "a: &x [1]\nb: !t [2]\n", "'a': [\n 'b',\n]\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		d := parserDepth(data)
		if d > 0 && nesting(data, d-1) == 0 {
			t.Errorf("nesting measures less than %d, the depth the parser reaches, in %q", d, data)
		}
	})
}
