package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file saved with a UTF-8 byte order mark (Windows editors do) loads, and
// its lines are counted as without it.
func TestByteOrderMark(t *testing.T) {
	const bom = "\ufeff"
	tests := []struct {
		name string
		src  string
		want string // "" for a valid file
	}{
		{"before a key", bom + baseYAML, ""},
		{"before a comment", bom + "# opctl\n" + baseYAML, ""},
		{"lines keep their numbers", bom + edit(t, baseYAML, map[int]string{18: `      stauts: status`}),
			`config t.yaml:18: unknown key "stauts" (did you mean "status"?)`},
		{"only a mark", bom + "\n", "config t.yaml: the file is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWithEnv("t.yaml", []byte(tt.src), noEnv)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("want valid, got:\n%v", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Fatalf("err = %v\nwant  %s", err, tt.want)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "opctl.yaml")
	if err := os.WriteFile(path, []byte(bom+baseYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Errorf("Load: %v", err)
	}
}

// No message of the loader holds a raw control character: each error is
// one line, and none can move a terminal's cursor.
func TestMessagesArePrintable(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"the parser's message naming a tab", "mysql:\n\tdsn: x\n", `config t.yaml:2: found character '\t' that cannot start any token`},
		{"a key with control characters", "mysql:\n  \"d\\x1bsn\\n\": x\n", `config t.yaml:2: unknown key "d\x1bsn\n" (did you mean "dsn"?)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWithEnv("t.yaml", []byte(tt.src), noEnv)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("err = %q\nwant  %q", err, tt.want)
			}
		})
	}
	for _, c := range []struct{ in, want string }{
		{"plain", "plain"},
		{"tab\there", `tab\there`},
		{"esc\x1b[31m, nl\n, del\x7f, c1\u0085", `esc\x1b[31m, nl\n, del\x7f, c1\u0085`},
		{"bad utf-8 \xff, kept \uFFFD é", `bad utf-8 \xff, kept ` + "\uFFFD é"},
	} {
		if got := printable(c.in); got != c.want || strings.ContainsAny(got, "\t\n\x1b\x7f") {
			t.Errorf("printable(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// laughs is a file whose aliases multiply: n pipelines, each an alias of
// one with n steps, each an alias of one step.
func laughs(n int) []byte {
	var b strings.Builder
	b.WriteString("x-step: &s {name: a, kind: local, evidence: \"SELECT id FROM t WHERE b = ?\"}\n")
	b.WriteString("x-steps: &l [" + strings.Repeat("*s, ", n-1) + "*s]\n")
	b.WriteString("x-pipeline: &p {name: p, topic: t, group: g, idempotency: {table: i, key: k, biz_id: b, action: a}, steps: *l}\n")
	b.WriteString("pipelines: [" + strings.Repeat("*p, ", n-1) + "*p]\n")
	return []byte(b.String())
}

func TestAliasesMultiplyingRefused(t *testing.T) {
	tests := []struct {
		name string
		src  []byte
		want string // "" when the aliases are within the limit
	}{
		// 300 × 300 steps: 36 s and 857 MB before the limit.
		{"300 pipelines of 300 steps", laughs(300), "config t.yaml:4: aliases make the file hold more than 100000 values beyond those written (here *p): write the repeated parts out, or repeat them less"},
		{"an alias chain", []byte("x-a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\nx-b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nx-c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n" +
			"x-d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\nx-e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\npipelines: [*e]\n"),
			"config t.yaml:6: aliases make the file hold more than 100000 values beyond those written (here *e)"},
		{"an alias chain under x- keys, unused", []byte("x-a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\nx-b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nx-c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n" +
			"x-d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\nx-e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n" + baseYAML), ""},
		{"10 pipelines of 10 steps", laughs(10), ""},
		{"anchors merged into each pipeline", []byte(edit(t, baseYAML, map[int]string{6: `x-audit: &a {table: opctl_audit}`, 7: `audit: {<<: *a, file: audit.jsonl}`})), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWithEnv("t.yaml", tt.src, noEnv)
			switch {
			case tt.want == "":
				if err != nil && strings.Contains(err.Error(), "aliases make") {
					t.Fatalf("refused: %v", err)
				}
			case err == nil || !strings.HasPrefix(err.Error(), tt.want):
				t.Fatalf("err = %.300v\nwant  %s", err, tt.want)
			default:
				if n := allocatedBytes(func() { _, _ = ParseWithEnv("t.yaml", tt.src, noEnv) }); n > 4<<20 {
					t.Errorf("%d bytes allocated to refuse it; want at most 4 MiB", n)
				}
			}
		})
	}
}
