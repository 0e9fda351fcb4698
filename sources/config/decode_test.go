package config

import (
	"strings"
	"testing"
)

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name  string
		edits map[int]string
		want  []wantErr
	}{
		{"unknown key with suggestion", map[int]string{18: `      stauts: status`},
			[]wantErr{{18, `unknown key "stauts" (did you mean "status"?)`}}},
		{"unknown key differing in case", map[int]string{10: `    Topic: settlement-event`},
			[]wantErr{{10, `unknown key "Topic" (did you mean "topic"?)`}}},
		{"unknown key without suggestion lists the known keys", map[int]string{18: `      colour: red`},
			[]wantErr{{18, `unknown key "colour" under pipelines[0].state (known keys: table, key, status, version,`}}},
		{"unknown top-level key", map[int]string{6: `audits:`},
			[]wantErr{{6, `unknown key "audits" (did you mean "audit"?)`}}},
		{"unknown key in a flow mapping", map[int]string{29: `        scan: {table: balance_journal, kye: biz_id}`},
			[]wantErr{{29, `unknown key "kye" (did you mean "key"?)`}}},
		{"every unknown key is reported", map[int]string{5: `  verison: "3.5.0"`, 26: `        knd: local`},
			[]wantErr{{5, `unknown key "verison" (did you mean "version"?)`}, {26, `unknown key "knd" (did you mean "kind"?)`}}},
		{"list where a string is expected", map[int]string{16: `      table: [a, b]`},
			[]wantErr{{16, `pipelines[0].state.table: expected a string, found a list`}}},
		{"string where a list is expected", map[int]string{21: `      initial: INIT`},
			[]wantErr{{21, `pipelines[0].state.initial: expected a list, found the string "INIT" (write [INIT] for a one-item list)`}}},
		{"string where a mapping is expected", map[int]string{29: `        scan: balance_journal`},
			[]wantErr{{29, `pipelines[0].steps[0].scan: expected a mapping (key: value), found the string "balance_journal"`}}},
		{"string where a boolean is expected", map[int]string{37: `        idempotent: "yes"`},
			[]wantErr{{37, `pipelines[0].steps[1].idempotent: expected true or false, found the string "yes"`}}},
		{"mapping in a list of strings", map[int]string{31: `          - {sql: x}`},
			[]wantErr{{31, `pipelines[0].steps[0].reverse[0]: expected a string, found a mapping`}}},
		{"repeated key", map[int]string{18: `      table: other`},
			[]wantErr{{18, `key "table" is repeated (first at line 16)`}}},
		{"keys are not expanded", map[int]string{18: `      "${STATUS_KEY}": status`},
			[]wantErr{{18, `unknown key "${STATUS_KEY}"`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWithEnv("t.yaml", []byte(edit(t, baseYAML, tt.edits)), envMap(map[string]string{"STATUS_KEY": "status"}))
			checkErrs(t, err, tt.want)
		})
	}
}

func TestUnknownKeyExactMessage(t *testing.T) {
	_, err := ParseWithEnv("opctl.yaml", []byte(edit(t, baseYAML, map[int]string{18: `      stauts: status`})), noEnv)
	want := `config opctl.yaml:18: unknown key "stauts" (did you mean "status"?)`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant    %s", err, want)
	}
}

func TestSyntaxAndDocumentErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		line int
		sub  string
	}{
		{"syntax error has a line", edit(t, baseYAML, map[int]string{10: `    topic: a: b`}), 10, "mapping value is not allowed"},
		{"tab has a line", edit(t, baseYAML, map[int]string{10: "\ttopic: x"}), 10, "cannot start any token"},
		{"unknown alias has a line", edit(t, baseYAML, map[int]string{10: `    topic: *nope`}), 10, `alias "nope"`},
		{"bad indentation has a line", edit(t, baseYAML, map[int]string{17: `     key: biz_id`}), 17, ""},
		{"empty file", "  \n", 0, "the file is empty"},
		{"only comments", "# nothing\n", 0, "only comments"},
		{"top level is a list", "- a\n- b\n", 1, "the file holds a list, not a configuration"},
		{"two documents", baseYAML + "---\nmysql: {}\n", 49, "a second YAML document"},
		{"unterminated ${", edit(t, baseYAML, map[int]string{2: `  dsn: "${OPCTL_MYSQL_DSN"`}), 2, "mysql.dsn: unterminated ${"},
		{"invalid variable name", edit(t, baseYAML, map[int]string{2: `  dsn: "${1DSN}"`}), 2, "invalid variable reference ${1DSN}"},
		{"shell form without colon", edit(t, baseYAML, map[int]string{2: `  dsn: "${DSN-x}"`}), 2, "write ${NAME} or ${NAME:-default}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWithEnv("t.yaml", []byte(tt.src), noEnv)
			var list ErrorList
			if err == nil {
				t.Fatal("no error")
			}
			if !asList(err, &list) || len(list) == 0 {
				t.Fatalf("not an ErrorList: %v", err)
			}
			if list[0].Line != tt.line || !strings.Contains(err.Error(), tt.sub) {
				t.Errorf("error %q: want line %d containing %q", err, tt.line, tt.sub)
			}
			if list[0].File != "t.yaml" {
				t.Errorf("file = %q", list[0].File)
			}
		})
	}
}

func asList(err error, list *ErrorList) bool {
	l, ok := err.(ErrorList)
	*list = l
	return ok
}

func TestScalarSourceTextKept(t *testing.T) {
	// goccy would decode 010 as "8" and 1.10 as "1.1".
	src := edit(t, baseYAML, map[int]string{10: `    topic: 1.10`, 11: `    group: 010`, 22: `      terminal: [0x1F, DONE]`})
	c, err := ParseWithEnv("t.yaml", []byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pipelines[0]
	if p.Topic != "1.10" || p.Group != "010" || p.State.Terminal[0] != "0x1F" {
		t.Errorf("topic %q group %q terminal %q", p.Topic, p.Group, p.State.Terminal)
	}
}
