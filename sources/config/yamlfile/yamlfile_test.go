package yamlfile

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// Every syntax error is at the line of its problem, not of the context the
// parser names (where the mapping or scalar it read began).
func TestSyntaxErrorLines(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		line      int
		msg       string
	}{
		{"a value after a value", "a: 1\nb: 2\nc: a: b\n", 3, "mapping value is not allowed in this context"},
		{"a tab as indentation", "a: 1\nmysql:\n\tdsn: x\n", 3, `found character '\t' that cannot start any token`},
		{"a tab on the first line", "\tdsn: x\n", 1, `found character '\t' that cannot start any token`},
		{"a tab continuing a scalar", "a:\n  - name: x\n\ttopic: y\n", 3, `found character '\t' that cannot start any token`},
		{"a key less indented", "a:\n  b:\n    c: 1\n    d: 2\n   e: 3\n", 5, "did not find expected key"},
		{"an unknown alias", "a: 1\nb: 2\nc: *nope\n", 3, `could not find alias "nope"`},
		{"an unknown alias after its name as text", "a: '*nope'\nb: *nope\n", 2, `could not find alias "nope"`},
		{"an unclosed list", "name: [x\n", 1, "did not find expected ',' or ']'"},
		{"an unclosed quote", "a: 1\nb: \"x\nc: 2\n", 2, "found unexpected end of stream"},
		{"a control character in a mapping", "a: 1\nb: x\x00y\n", 2, `found character '\x00', which a YAML file may not hold`},
		{"a byte that is not UTF-8", "a: 1\n\nb: \xff\n", 3, `found character '\xff', which a YAML file may not hold`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, e := Parse([]byte(tc.src))
			if e == nil || e.Kind != Syntax || e.Line != tc.line || e.Msg != tc.msg {
				t.Fatalf("error %+v, want line %d: %s", e, tc.line, tc.msg)
			}
		})
	}
}

// What is not a mapping parses as what it is, whatever bytes it holds.
func TestNotYAMLIsAValue(t *testing.T) {
	root, e := Parse([]byte("HOME=/root\x00DB_PASSWORD=S3cret\x00PATH=/bin\x00"))
	if e != nil || root.Kind != ScalarNode || !strings.Contains(root.Value, "S3cret") {
		t.Fatalf("root %+v, error %v", root, e)
	}
	for _, src := range []string{"# only\n# comments\n", "---\n", "a: 1\n---\n# c\n"} {
		root, e := Parse([]byte(src))
		if e != nil || (root == nil) != (src != "a: 1\n---\n# c\n") {
			t.Errorf("%q: root %v, error %v", src, root, e)
		}
	}
	if _, e := Parse([]byte("a: 1\n---\nb: 2\n")); e == nil || e.Kind != SecondDocument || e.Line != 3 {
		t.Errorf("second document: %+v", e)
	}
}

// The limits are exact: 64 levels load and 65 do not, whichever way they
// nest; 256 keys of a block mapping load and 257 do not; a flow mapping has
// no bound but the file's size.
func TestLimits(t *testing.T) {
	flow := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) + "\n" }
	var block strings.Builder
	for i := range MaxNesting + 1 {
		block.WriteString(strings.Repeat(" ", i) + "a:\n")
	}
	blockSrc := block.String()
	cut := func(s string, lines int) string {
		return strings.Join(strings.SplitAfter(s, "\n")[:lines], "") + strings.Repeat(" ", lines) + "x\n"
	}
	keys := func(n int, flow bool) string {
		var b strings.Builder
		if flow {
			b.WriteString("{")
		}
		for i := range n {
			if flow {
				b.WriteString("k" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + ": 1, ")
			} else {
				b.WriteString("k" + string(rune('a'+i%26)) + ": 1\n")
			}
		}
		if flow {
			b.WriteString("z: 2}")
		}
		return b.String()
	}
	for _, tc := range []struct {
		name string
		src  string
		kind Kind // 0 with line 0: loads
		line int
	}{
		{"64 flow levels", flow(64), 0, 0},
		{"65 flow levels", flow(65), TooDeep, 1},
		{"64 block levels", cut(blockSrc, 64), 0, 0},
		{"65 block levels", blockSrc, TooDeep, 65},
		{"compact lists", strings.Repeat("- ", 65) + "x\n", TooDeep, 1},
		{"a list item's mapping", "a:\n" + strings.Repeat("  ", 0) + "- " + strings.Repeat("[", 63) + strings.Repeat("]", 63) + "\n", TooDeep, 2},
		{"256 keys", keys(256, false), 0, 0},
		{"257 keys", keys(257, false), TooWide, 257},
		{"a flow mapping of 5,000 keys", keys(5000, true), 0, 0},
		{"a long list", strings.Repeat("- 1\n", 5000), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, e := Parse([]byte(tc.src))
			switch {
			case tc.line == 0 && e != nil:
				t.Fatalf("refused: %v", e)
			case tc.line != 0 && (e == nil || e.Kind != tc.kind || e.Line != tc.line):
				t.Fatalf("error %+v, want kind %d at line %d", e, tc.kind, tc.line)
			}
		})
	}
}

type inner struct {
	Name string   `yaml:"name"`
	On   bool     `yaml:"on"`
	List []string `yaml:"list"`
}

type outer struct {
	ID    uint32 `yaml:"id"`
	In    *inner `yaml:"in"`
	Items []inner
}

// Decode reports every problem with its line, keeps scalars as written,
// merges as YAML says, and records the line of every value.
func TestDecode(t *testing.T) {
	src := "x-base: &b {name: base, on: true}\nid: 0x10\nin:\n  <<: *b\n  name: own\n  list: [010, 1.10]\nitems:\n  - name: a\n  - *b\n"
	root, e := Parse([]byte(src))
	if e != nil {
		t.Fatal(e)
	}
	var o outer
	lines, errs := Decode(root, &o, "x-")
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	want := outer{ID: 16, In: &inner{Name: "own", On: true, List: []string{"010", "1.10"}}, Items: []inner{{Name: "a"}, {Name: "base", On: true}}}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("decoded %+v %+v, want %+v %+v", o, *o.In, want, *want.In)
	}
	if lines["in.name"] != 5 || lines["in.list[1]"] != 6 || lines["items[1]"] != 9 {
		t.Errorf("lines %v", lines)
	}

	bad := "id: -1\nin:\n  nme: x\n  on: \"yes\"\n  list: one\n  name: a\n  name: b\nitems: {a: 1}\ncolour: red\n"
	root, e = Parse([]byte(bad))
	if e != nil {
		t.Fatal(e)
	}
	_, errs = Decode(root, &outer{}, "x-")
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	wantErrs := []string{
		`line 1: id: expected a whole number from 0 to 4294967295, found a number`,
		`line 3: unknown key "nme" (did you mean "name"?)`,
		`line 4: in.on: expected true or false, found the string "yes"`,
		`line 5: in.list: expected a list, found the string "one" (write [one] for a one-item list)`,
		`line 7: key "name" is repeated (first at line 6)`,
		`line 8: items: expected a list, found a mapping`,
		`line 9: unknown key "colour" (known keys: id, in, items)`,
	}
	if strings.Join(got, "\n") != strings.Join(wantErrs, "\n") {
		t.Errorf("errors:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantErrs, "\n"))
	}
}

// Aliases that multiply are counted, saturating, without expanding them.
func TestAliasCount(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("x-a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n")
	for i, c := range "bcde" {
		prev := string("abcd"[i])
		b.WriteString("x-" + string(c) + ": &" + string(c) + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n")
	}
	unused := b.String()
	if line, _ := AliasCount(mustParse(t, unused), 100_000, "x-"); line != 0 {
		t.Errorf("aliases under x- keys counted: line %d", line)
	}
	if line, name := AliasCount(mustParse(t, unused+"y: [*e]\n"), 100_000, "x-"); line != 6 || name != "e" {
		t.Errorf("line %d, alias %q; want 6, e", line, name)
	}
	if line, _ := AliasCount(mustParse(t, unused+"y: [*c, *c]\n"), 100_000, "x-"); line != 0 {
		t.Errorf("2,000 values refused: line %d", line)
	}
}

func mustParse(t *testing.T, src string) *Node {
	t.Helper()
	root, e := Parse([]byte(src))
	if e != nil {
		t.Fatal(e)
	}
	return root
}

func TestDidYouMean(t *testing.T) {
	for _, tc := range []struct{ word, want string }{
		{"stauts", ` (did you mean "status"?)`}, {"STATUS", ` (did you mean "status"?)`},
		{"status", ""}, {"x", ""}, {"colour", ""},
	} {
		if got := DidYouMean(tc.word, []string{"status", "table", "id"}); got != tc.want {
			t.Errorf("DidYouMean(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
}

// FuzzParse: no input panics the layer; every error is at a line of the
// file; a tree it returns is within the limits.
//
//	go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 1m -parallel 1 ./sources/config/yamlfile/
func FuzzParse(f *testing.F) {
	for _, s := range []string{"a: 1\n", "a: [1, {b: [2]}]\n", "a: \"[[\"\n", "- - a\n", "a: |\n  [[\nb: 1\n", "a: b\n  [c\n", "? [a]\n: b\n",
		"a: &x [1]\nb: !t [2]\nc: *x\n<<: *x\n", "'a': [\n 'b',\n]\n", "a:\n\tb: 1\n", strings.Repeat("k: 1\n", 300), "a: *nope\n", "a: 1\n---\nb: 2\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		root, e := Parse(data)
		if e != nil {
			if lines := bytes.Count(data, []byte("\n")) + 1; e.Line < 1 || e.Line > lines || e.Msg == "" && e.Kind == Syntax {
				t.Fatalf("error %+v outside the file's %d lines", e, lines)
			}
			return
		}
		if root == nil {
			return
		}
		if err := checkLimits(root, 1); err != nil {
			t.Fatalf("a tree over the limits: %v", err)
		}
		var v struct {
			A []string `yaml:"a"`
			B struct {
				C bool `yaml:"c"`
			} `yaml:"b"`
		}
		if line, _ := AliasCount(root, 10_000, "x-"); line == 0 {
			_, _ = Decode(root, &v, "x-")
		}
	})
}
