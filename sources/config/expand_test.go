package config

import (
	"slices"
	"testing"
)

func TestExpandString(t *testing.T) {
	env := envMap(map[string]string{
		"A": "alpha", "EMPTY": "", "INJECT": "${A}", "QUOTES": `it's "q": x`,
	})
	tests := []struct {
		in, want string
		unset    []string
	}{
		{"plain", "plain", nil},
		{"${A}", "alpha", nil},
		{"x-${A}-y", "x-alpha-y", nil},
		{"${MISSING}", "", []string{"MISSING"}},
		{"${MISSING}/${A}/${OTHER}", "/alpha/", []string{"MISSING", "OTHER"}},
		{"${MISSING:-dflt}", "dflt", nil},
		{"${EMPTY:-dflt}", "dflt", nil},
		{"${EMPTY}", "", nil}, // set but empty: not "unset"
		{"${A:-dflt}", "alpha", nil},
		{"${MISSING:-http://h:1}/x?a={biz_id}", "http://h:1/x?a={biz_id}", nil},
		{"${MISSING:-${A}}", "alpha", nil},
		{"${MISSING:-${NOPE}}", "", []string{"NOPE"}},
		{"${MISSING:-}", "", nil},
		{"${INJECT}", "${A}", nil}, // an env value is not expanded again
		{"$${A}", "${A}", nil},
		{"pa$$word$", "pa$$word$", nil},
		{"$A and $HOME", "$A and $HOME", nil},
		{"${QUOTES}", `it's "q": x`, nil},
	}
	for _, tt := range tests {
		got, unset, err := expandString(tt.in, env)
		if err != nil || got != tt.want || !slices.Equal(unset, tt.unset) {
			t.Errorf("expand(%q) = %q, %q, %v; want %q, %q", tt.in, got, unset, err, tt.want, tt.unset)
		}
	}
	for _, bad := range []string{"${A", "${}", "${A B}", "${A-x}", "${MISSING:-${B}"} {
		if _, _, err := expandString(bad, env); err == nil {
			t.Errorf("expand(%q): no error", bad)
		}
	}
}

func TestExpandDoesNotChangeStructure(t *testing.T) {
	// An environment value full of YAML syntax stays one string.
	nasty := "x\" \nfoo: bar\npipelines: []\n- a: 'b\n# c: {d}, e: [f"
	src := edit(t, baseYAML, map[int]string{
		2: `  dsn: "${OPCTL_MYSQL_DSN}"`,
		7: `  file: ${AUDIT_FILE}`,
	})
	c, err := ParseWithEnv("t.yaml", []byte(src), envMap(map[string]string{"OPCTL_MYSQL_DSN": nasty, "AUDIT_FILE": nasty}))
	if err != nil {
		t.Fatal(err)
	}
	if c.MySQL.DSN != nasty || c.Audit.File != nasty {
		t.Errorf("dsn %q file %q, want %q", c.MySQL.DSN, c.Audit.File, nasty)
	}
	if len(c.Pipelines) != 1 || c.Pipelines[0].Name != "settlement" || c.Audit.Table != "" {
		t.Errorf("structure changed: %d pipelines, audit %+v", len(c.Pipelines), c.Audit)
	}
	if len(c.UnsetVars()) != 0 {
		t.Errorf("UnsetVars = %q", c.UnsetVars())
	}
}

func TestExpandEverywhere(t *testing.T) {
	src := edit(t, baseYAML, map[int]string{
		4:  `  brokers: ["${OPCTL_BROKERS:-127.0.0.1:9092}"]`,
		10: `    topic: "${TOPIC}"`,
		16: `      table: ${SCHEMA:-pay}.biz_operation`,
		22: `      terminal: ["${DONE_STATUS}"]`,
		34: `        done_status: "${DONE_STATUS}"`,
		36: `        probe: "${NOTIFY_URL:-http://127.0.0.1:8081}/status?request_id={request_id}"`,
	})
	env := map[string]string{"OPCTL_BROKERS": "k1:9092, k2:9093,", "TOPIC": "pay-events", "DONE_STATUS": "FINISHED", "NOTIFY_URL": "https://notify.internal"}
	c, err := ParseWithEnv("t.yaml", []byte(src), envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pipelines[0]
	if !slices.Equal(c.Kafka.Brokers, []string{"k1:9092", "k2:9093"}) {
		t.Errorf("brokers = %q", c.Kafka.Brokers)
	}
	if p.Topic != "pay-events" || p.State.Table != "pay.biz_operation" || p.State.Terminal[0] != "FINISHED" ||
		p.Steps[1].DoneStatus != "FINISHED" || p.Steps[1].Probe != "https://notify.internal/status?request_id={request_id}" {
		t.Errorf("not expanded: %+v %+v %+v", p.Topic, p.State, p.Steps[1])
	}

	// Without the variables the defaults apply and the unset ones are named.
	c, err = ParseWithEnv("t.yaml", []byte(edit(t, baseYAML, map[int]string{4: `  brokers: ["${OPCTL_BROKERS:-127.0.0.1:9092}"]`, 2: `  dsn: "${OPCTL_MYSQL_DSN}"`, 7: `  file: "${B}${A}${A}"`})), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Kafka.Brokers, []string{"127.0.0.1:9092"}) {
		t.Errorf("brokers = %q", c.Kafka.Brokers)
	}
	if got := c.UnsetVars(); !slices.Equal(got, []string{"A", "B", "OPCTL_MYSQL_DSN"}) {
		t.Errorf("UnsetVars = %q", got)
	}
	if got := c.UnsetVarsAt("mysql.dsn"); !slices.Equal(got, []string{"OPCTL_MYSQL_DSN"}) {
		t.Errorf("UnsetVarsAt(mysql.dsn) = %q", got)
	}
	if got := c.UnsetVarsAt("audit.file"); !slices.Equal(got, []string{"B", "A"}) {
		t.Errorf("UnsetVarsAt(audit.file) = %q", got)
	}
	if got := c.UnsetVarsAt("kafka.brokers[0]"); got != nil {
		t.Errorf("a variable with a default reported unset: %q", got)
	}
}

func TestExpandedValuesAreValidated(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []wantErr
	}{
		{"unset table names the variable", nil,
			[]wantErr{{16, `state.table is required: $STATE_TABLE is not set`}}},
		{"injected identifier is rejected", map[string]string{"STATE_TABLE": "t`; DROP TABLE x; --"},
			[]wantErr{{16, "state.table \"t`; DROP TABLE x; --\" is not a valid identifier"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := edit(t, baseYAML, map[int]string{16: `      table: "${STATE_TABLE}"`})
			_, err := ParseWithEnv("t.yaml", []byte(src), envMap(tt.env))
			checkErrs(t, err, tt.want)
		})
	}
}
