package config

import (
	"slices"
	"strings"
	"testing"
)

func TestBaseConfigIsValid(t *testing.T) {
	c, err := ParseWithEnv("t.yaml", []byte(baseYAML), noEnv)
	if err != nil {
		t.Fatalf("base config: %v", err)
	}
	if err := c.ValidateKafka(); err != nil {
		t.Errorf("ValidateKafka: %v", err)
	}
	if err := c.ValidateMySQL(); err != nil {
		t.Errorf("ValidateMySQL: %v", err)
	}
	p := c.Pipeline("settlement")
	if p == nil || len(p.Steps) != 2 || p.State == nil || p.Idempotency == nil || p.Entity == nil {
		t.Fatalf("pipeline not decoded: %+v", p)
	}
	if got := p.Steps[0].Scan; got == nil || *got != (Scan{Table: "balance_journal", Key: "biz_id", Time: "created_at"}) {
		t.Errorf("scan = %+v", got)
	}
	if c.Path != "" {
		t.Errorf("Parse set Path = %q, want empty", c.Path)
	}
}

func TestValidationRules(t *testing.T) {
	tests := []struct {
		name  string
		edits map[int]string
		want  []wantErr
	}{
		// identifiers
		{"state table not an identifier", map[int]string{16: `      table: "biz operation"`},
			[]wantErr{{16, `pipeline "settlement": state.table "biz operation" is not a valid identifier`}}},
		{"state column qualified", map[int]string{17: `      key: t.biz_id`},
			[]wantErr{{17, `state.key "t.biz_id" must be a plain column name`}}},
		{"state optional column bad", map[int]string{19: `      partition: "src-partition"`},
			[]wantErr{{19, `state.partition "src-partition" is not a valid identifier`}}},
		{"idempotency table bad", map[int]string{39: `      table: 1bad`},
			[]wantErr{{39, `idempotency.table "1bad" is not a valid identifier`}}},
		{"idempotency column bad", map[int]string{41: "      biz_id: \"biz_id`; DROP\""},
			[]wantErr{{41, `idempotency.biz_id "biz_id`}}},
		{"scan key bad", map[int]string{29: `        scan: {table: balance_journal, key: "bad-key", time: created_at}`},
			[]wantErr{{29, `step "debit": scan.key "bad-key" is not a valid identifier`}}},
		{"scan table required", map[int]string{29: `        scan: {key: biz_id}`},
			[]wantErr{{29, `step "debit": scan.table is required`}}},
		{"audit table bad", map[int]string{7: `  table: "opctl audit"`},
			[]wantErr{{7, `audit.table "opctl audit" is not a valid identifier`}}},
		{"audit table too long for attempt table", map[int]string{7: "  table: " + strings.Repeat("a", 60)},
			[]wantErr{{7, `the attempt table`}}},

		// pipeline
		{"pipeline name empty", map[int]string{9: `  - name: ""`},
			[]wantErr{{9, `pipelines[0]: name is required`}}},
		{"pipeline name bad", map[int]string{9: `  - name: "settle ment"`},
			[]wantErr{{9, `pipeline name "settle ment" may only contain letters, digits`}}},
		{"topic required", map[int]string{10: ``},
			[]wantErr{{9, `pipeline "settlement": topic is required`}}},
		{"topic invalid", map[int]string{10: `    topic: "a topic"`},
			[]wantErr{{10, `topic "a topic" is not a valid Kafka topic name`}}},
		{"group required", map[int]string{11: ``},
			[]wantErr{{9, `pipeline "settlement": group is required`}}},
		{"partitioner unknown", map[int]string{12: `    partitioner: murmur`},
			[]wantErr{{12, `partitioner "murmur" is not one of murmur2, fnv1a, crc32, stored (did you mean "murmur2"?)`}}},
		{"stored needs partition", map[int]string{12: `    partitioner: stored`, 19: ``},
			[]wantErr{{12, `partitioner "stored" needs state.partition and state.offset`}}},
		{"stored needs offset", map[int]string{12: `    partitioner: stored`, 20: ``},
			[]wantErr{{12, `partitioner "stored" needs state.partition and state.offset`}}},
		{"offset_reset unknown", map[int]string{14: `    offset_reset: newest`},
			[]wantErr{{14, `offset_reset "newest" is not latest or earliest`}}},
		{"message_key unknown placeholder", map[int]string{13: `    message_key: "{order_id}"`},
			[]wantErr{{13, `message_key "{order_id}" uses unknown placeholder {order_id}`}}},
		{"message_key unclosed", map[int]string{13: `    message_key: "{biz_id"`},
			[]wantErr{{13, `has an unclosed {`}}},
		{"no steps", map[int]string{24: ``, 25: ``, 26: ``, 27: ``, 28: ``, 29: ``, 30: ``, 31: ``, 32: ``, 33: ``, 34: ``, 35: ``, 36: ``, 37: ``},
			[]wantErr{{9, `no steps: a pipeline needs at least one step`}, {47, `entity.effect_step "debit" is not a step of this pipeline`}}},
		{"neither state nor idempotency nor any readable step", map[int]string{15: ``, 16: ``, 17: ``, 18: ``, 19: ``, 20: ``, 21: ``, 22: ``, 23: ``,
			25: ``, 26: ``, 27: ``, 28: ``, 29: ``, 30: ``, 31: ``, 35: ``, 36: ``, 37: ``,
			38: ``, 39: ``, 40: ``, 41: ``, 42: ``, 43: ``, 44: ``, 45: ``, 46: ``, 47: ``},
			[]wantErr{{9, `needs a state block, an idempotency block, or a step whose effects opctl can read`}}},
		// Seed 000's own schema: no state, no idempotency; the ledger's
		// evidence and the commit say how far an operation got.
		{"neither state nor idempotency, evidence steps", map[int]string{15: ``, 16: ``, 17: ``, 18: ``, 19: ``, 20: ``, 21: ``, 22: ``, 23: ``, 38: ``, 39: ``, 40: ``, 41: ``, 42: ``},
			nil},
		{"commit unknown", map[int]string{14: `    commit: after_step`},
			[]wantErr{{14, `commit "after_step" is not one of after_steps, before_steps, auto: when does the consumer commit a message's offset? (did you mean "after_steps"?)`}}},
		{"commit known", map[int]string{14: `    commit: auto`}, nil},
		{"pipeline mysql time zone", map[int]string{14: "    mysql:\n      dsn: \"u:p@tcp(db2:3306)/x\"\n      time_zone: \"+25:00\""},
			[]wantErr{{16, `pipeline "settlement": mysql.time_zone "+25:00"`}}},
		{"redrive on a local step", map[int]string{29: `        redrive: "http://h/grant?biz_id={biz_id}"`},
			[]wantErr{{29, `step "debit": redrive is only for remote steps`}}},
		{"redrive without a placeholder", map[int]string{37: `        redrive: "http://h/grant"`},
			[]wantErr{{37, `step "notify": redrive must contain {biz_id} or {request_id}`}}},
		{"redrive by request id without intent", map[int]string{35: ``, 36: ``, 37: `        redrive: "http://h/grant?r={request_id}"`},
			[]wantErr{{37, `redrive uses {request_id} but the step has no intent query`}}},
		{"redrive by biz_id", map[int]string{37: `        redrive: "http://h/grant?order={biz_id}"`}, nil},
		{"idempotency without biz_id", map[int]string{41: ``}, nil},
		{"idempotency without biz_id, key without biz_id", map[int]string{13: `    message_key: "{msg_id}"`, 41: ``},
			[]wantErr{{38, `idempotency.biz_id is not set, so the records are found through the operation's messages, but message_key "{msg_id}" does not hold {biz_id}`}}},
		{"idempotency reopen", map[int]string{42: "      action: action\n      reopen: remove"},
			[]wantErr{{43, `idempotency.reopen "remove" is not pending or delete`}}},
		{"idempotency msg_id_path", map[int]string{42: "      action: action\n      msg_id_path: msg_id"},
			[]wantErr{{43, `idempotency.msg_id_path "msg_id" is not a JSON path`}}},

		// state
		{"state table required", map[int]string{16: ``},
			[]wantErr{{15, `state.table is required`}}},
		{"state status required", map[int]string{18: ``},
			[]wantErr{{15, `state.status is required`}}},
		{"terminal empty", map[int]string{22: `      terminal: []`},
			[]wantErr{{22, `state.terminal is empty`}}},
		{"terminal absent", map[int]string{22: ``},
			[]wantErr{{15, `state.terminal is empty`}}},
		{"status in two lists", map[int]string{23: `      failed: [FAILED, INIT]`},
			[]wantErr{{23, `status "INIT" is in both state.initial and state.failed`}}},

		// steps
		{"step names repeat", map[int]string{32: `      - name: debit`},
			[]wantErr{{32, `step name "debit" is used twice (first at line 25)`}}},
		{"step kind unknown", map[int]string{26: `        kind: locl`},
			[]wantErr{{26, `kind "locl" is not one of local, remote, outbox (did you mean "local"?)`}}},
		{"step kind missing", map[int]string{26: ``},
			[]wantErr{{25, `step "debit": kind is required`}}},
		{"local step without evidence", map[int]string{28: ``},
			[]wantErr{{25, `step "debit": a local step needs evidence`}}},
		{"outbox step without evidence", map[int]string{26: `        kind: outbox`, 28: ``, 30: ``, 31: ``},
			[]wantErr{{25, `step "debit": an outbox step needs evidence`}}},
		// A remote step with neither is unverified (seed 000's risk RPC).
		{"remote step without intent or probe", map[int]string{35: ``, 36: ``, 37: ``}, nil},
		{"probe on a local step", map[int]string{29: `        probe: "http://h/x?biz_id={biz_id}"`},
			[]wantErr{{29, `step "debit": probe is only for remote steps`}}},
		// Seed 001's order row records PROCESSING and DONE only.
		{"done_status missing", map[int]string{27: ``}, nil},
		{"done_status repeats", map[int]string{34: `        done_status: DEBIT_DONE`},
			[]wantErr{{34, `step "notify": done_status "DEBIT_DONE" repeats: step "debit" already uses it`}}},
		{"done_status is initial", map[int]string{27: `        done_status: INIT`},
			[]wantErr{{27, `done_status "INIT" is an initial status`}}},
		{"done_status is failed", map[int]string{27: `        done_status: FAILED`},
			[]wantErr{{27, `done_status "FAILED" is a failed status`}}},
		{"done_status terminal before the last step", map[int]string{27: `        done_status: DONE`},
			[]wantErr{{27, `done_status "DONE" is a terminal status (state.terminal), but only the last step ("notify")`},
				{34, `done_status "DONE" repeats: step "debit" already uses it`}}},
		{"evidence not a select", map[int]string{28: `        evidence: "DELETE FROM balance_journal WHERE biz_id = ?"`},
			[]wantErr{{28, `step "debit": evidence must be a SELECT (it starts with "DELETE")`}}},
		{"evidence two placeholders", map[int]string{28: `        evidence: "SELECT id FROM j WHERE biz_id = ? AND k = ?"`},
			[]wantErr{{28, `evidence must contain exactly one ? placeholder (bound to the biz_id), found 2`}}},
		{"evidence placeholder only inside quotes", map[int]string{28: `        evidence: "SELECT id FROM j WHERE note = 'why?' -- ?"`},
			[]wantErr{{28, `found 0`}}},
		{"evidence unterminated quote", map[int]string{28: `        evidence: "SELECT id FROM j WHERE biz_id = ? AND k = 'x"`},
			[]wantErr{{28, `has an unterminated '...' quote`}}},
		{"intent not a select", map[int]string{35: `        intent: "  update step_intent set x = ?"`},
			[]wantErr{{35, `step "notify": intent must be a SELECT`}}},
		{"reverse on a remote step", map[int]string{37: `        reverse: ["DELETE FROM x WHERE id = :id"]`},
			[]wantErr{{37, `step "notify": reverse is only allowed on local steps (this step is remote)`}}},
		{"reverse statement empty", map[int]string{31: `          - "  "`},
			[]wantErr{{31, `step "debit": reverse[0] is empty`}}},
		{"probe not http", map[int]string{36: `        probe: "ftp://h/status?request_id={request_id}"`},
			[]wantErr{{36, `probe must be an http:// or https:// URL`}}},
		{"probe with a placeholder in the host", map[int]string{36: `        probe: "http://{request_id}.svc/status"`},
			[]wantErr{{36, `probe has a placeholder before its path`}}},
		{"compensate with a placeholder in the user", map[int]string{37: `        compensate: "https://{biz_id}@h/cancel?id={biz_id}"`},
			[]wantErr{{37, `compensate has a placeholder before its path`}}},
		{"probe without placeholder", map[int]string{36: `        probe: "http://h/status"`},
			[]wantErr{{36, `probe must contain {request_id} or {biz_id}`}}},
		{"probe unknown placeholder", map[int]string{36: `        probe: "http://h/status?id={requestid}"`},
			[]wantErr{{36, `uses unknown placeholder {requestid} (did you mean "request_id"?)`}}},
		{"probe by request_id without intent", map[int]string{35: ``},
			[]wantErr{{36, `probe uses {request_id} but the step has no intent query`}}},
		{"probe_applied without probe", map[int]string{36: `        probe_applied: [OK]`},
			[]wantErr{{36, `probe_applied has no effect without probe`}}},
		{"probe status both applied and absent", map[int]string{37: `        probe_absent: [NOT_FOUND, SUCCESS]`},
			[]wantErr{{37, `probe status "SUCCESS" is in both probe_applied and probe_absent`}}},
		{"compensate not a URL", map[int]string{37: `        compensate: "notify-cancel"`},
			[]wantErr{{37, `compensate must be an http:// or https:// URL`}}},

		// idempotency
		{"idempotency action required", map[int]string{42: ``},
			[]wantErr{{38, `pipeline "settlement": idempotency.action is required`}}},
		{"idempotency table and key required", map[int]string{39: ``, 40: ``},
			[]wantErr{{38, `idempotency.table is required`}, {38, `idempotency.key is required`}}},

		// entity
		{"entity query required", map[int]string{44: ``},
			[]wantErr{{43, `entity.query is required`}}},
		{"entity query two placeholders", map[int]string{44: `      query: "SELECT status FROM orders WHERE order_id = ? OR ref = ?"`},
			[]wantErr{{44, `entity.query must contain exactly one ? placeholder`}}},
		{"entity effect_step unknown", map[int]string{47: `      effect_step: debt`},
			[]wantErr{{47, `entity.effect_step "debt" is not a step of this pipeline (did you mean "debit"?)`}}},
		{"entity effect_step missing", map[int]string{47: ``},
			[]wantErr{{43, `entity.effect_step is required`}}},
		{"entity cancels empty", map[int]string{46: `      cancels: []`},
			[]wantErr{{46, `entity.cancels is empty`}}},
		{"entity lifecycle and cancels overlap", map[int]string{46: `      cancels: [REFUNDED, PAID]`},
			[]wantErr{{46, `status "PAID" is in both entity.lifecycle and entity.cancels`}}},
		{"entity batch lookup: status missing", map[int]string{44: "      query: \"SELECT status FROM orders WHERE order_id = ?\"\n      table: orders\n      key: order_id"},
			[]wantErr{{43, `pipeline "settlement": entity.status is required when entity.table, entity.key or entity.status is set`}}},
		{"entity batch lookup: table and key missing", map[int]string{44: "      query: \"SELECT status FROM orders WHERE order_id = ?\"\n      status: status"},
			[]wantErr{{43, `entity.table is required when`}, {43, `entity.key is required when`}}},
		{"entity batch lookup: key not an identifier", map[int]string{44: "      query: \"SELECT status FROM orders WHERE order_id = ?\"\n      table: orders\n      key: \"order id\"\n      status: status"},
			[]wantErr{{46, `entity.key "order id" is not a valid identifier`}}},
		{"entity batch lookup: status qualified", map[int]string{44: "      query: \"SELECT status FROM orders WHERE order_id = ?\"\n      table: shop.orders\n      key: order_id\n      status: o.status"},
			[]wantErr{{47, `entity.status "o.status" must be a plain column name`}}},

		// kafka
		{"kafka version", map[int]string{5: `  version: "3.5"`},
			[]wantErr{{5, `kafka.version "3.5" is not a Kafka version`}}},
		{"sasl mechanism", map[int]string{5: `  sasl: {mechanism: SCRAM-SHA256, user: u, password: p}`},
			[]wantErr{{5, `kafka.sasl.mechanism "SCRAM-SHA256" is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (did you mean "SCRAM-SHA-256"?)`}}},
		{"tls cert without key", map[int]string{5: `  tls: {enabled: true, cert_file: c.pem}`},
			[]wantErr{{5, `kafka.tls: cert_file and key_file go together`}}},
		{"isolation level unknown", map[int]string{5: `  isolation_level: READ_COMMITTED`},
			[]wantErr{{5, `kafka.isolation_level "READ_COMMITTED" is not read_committed or read_uncommitted (set it to the consumers' isolation.level) (did you mean "read_committed"?)`}}},
		{"isolation level typo", map[int]string{5: `  isolation_level: read_commited`},
			[]wantErr{{5, `(did you mean "read_committed"?)`}}},

		// every error, sorted by line
		{"all errors are reported in line order", map[int]string{47: `      effect_step: nope`, 5: `  version: x`, 28: `        evidence: "SELECT 1"`},
			[]wantErr{{5, `kafka.version`}, {28, `found 0`}, {47, `"nope"`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWithEnv("t.yaml", []byte(edit(t, baseYAML, tt.edits)), noEnv)
			checkErrs(t, err, tt.want)
		})
	}
}

func TestPipelineNamesUnique(t *testing.T) {
	lines := strings.Split(baseYAML, "\n")
	second := strings.Join(lines[8:47], "\n") // lines 9..47: the pipeline
	src := baseYAML + second + "\n"
	_, err := ParseWithEnv("t.yaml", []byte(src), noEnv)
	checkErrs(t, err, []wantErr{{48, `pipeline name "settlement" is used twice (first at line 9)`}})
}

func TestNoPipelines(t *testing.T) {
	_, err := ParseWithEnv("t.yaml", []byte("kafka:\n  version: \"3.5.0\"\npipelines: []\n"), noEnv)
	checkErrs(t, err, []wantErr{{3, `no pipelines`}})
}

func TestValidVariants(t *testing.T) {
	tests := []struct {
		name  string
		edits map[int]string
	}{
		{"stored partitioner with both columns", map[int]string{12: `    partitioner: stored`}},
		{"empty partitioner", map[int]string{12: ``}},
		{"question mark in a string and a comment", map[int]string{28: `        evidence: "select id, account_id, delta FROM j WHERE note <> 'a?b' /* ? */ AND biz_id = ? # ?"`}},
		{"escaped quote in a string", map[int]string{28: `        evidence: "SELECT id, account_id, delta FROM j WHERE note <> 'it\\'s?' AND biz_id = ?"`}},
		{"probe by biz_id without intent", map[int]string{35: ``, 36: `        probe: "https://h/status?biz_id={biz_id}"`, 37: ``}},
		{"message_key with msg_id", map[int]string{13: `    message_key: "{biz_id}-{msg_id}"`}},
		{"state without idempotency", map[int]string{38: ``, 39: ``, 40: ``, 41: ``, 42: ``}},
		{"x- keys hold anchors", map[int]string{6: `x-defaults: &cols {table: opctl_audit}`, 7: `audit: *cols`}},
		{"nested anchor under an x- key", map[int]string{6: `x-defaults: {inner: &cols {table: opctl_audit}}`, 7: `audit: *cols`}},
		{"merge key", map[int]string{6: `x-audit: &a {table: opctl_audit}`, 7: `audit: {<<: *a, file: audit.jsonl}`}},
		{"sasl ok", map[int]string{5: `  sasl: {mechanism: SCRAM-SHA-512, user: u, password: p}`}},
		{"earliest", map[int]string{14: `    offset_reset: earliest`}},
		{"read_committed", map[int]string{5: `  isolation_level: read_committed`}},
		{"read_uncommitted", map[int]string{5: `  isolation_level: read_uncommitted`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseWithEnv("t.yaml", []byte(edit(t, baseYAML, tt.edits)), noEnv); err != nil {
				t.Fatalf("want valid, got:\n%v", err)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	src := edit(t, baseYAML, map[int]string{12: ``, 13: ``, 14: ``})
	c, err := ParseWithEnv("t.yaml", []byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pipelines[0]
	if p.Partitioner != "murmur2" || p.OffsetReset != "latest" || p.MessageKey != "{biz_id}" {
		t.Errorf("defaults: partitioner %q offset_reset %q message_key %q", p.Partitioner, p.OffsetReset, p.MessageKey)
	}
	if s := p.Steps[1]; !slices.Equal(s.ProbeApplied, []string{"APPLIED", "SUCCESS"}) || !slices.Equal(s.ProbeAbsent, []string{"NOT_FOUND"}) {
		t.Errorf("probe defaults: applied %q absent %q", s.ProbeApplied, s.ProbeAbsent)
	}
	if s := p.Steps[0]; s.ProbeApplied != nil || s.ProbeAbsent != nil {
		t.Errorf("a step without probe got probe lists: %q %q", s.ProbeApplied, s.ProbeAbsent)
	}

	// A written value is kept, and the defaults are copies.
	src = edit(t, baseYAML, map[int]string{12: `    partitioner: fnv1a`, 37: `        probe_applied: [OK]`})
	c, err = ParseWithEnv("t.yaml", []byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	p = c.Pipelines[0]
	if p.Partitioner != "fnv1a" || !slices.Equal(p.Steps[1].ProbeApplied, []string{"OK"}) || !slices.Equal(p.Steps[1].ProbeAbsent, []string{"NOT_FOUND"}) {
		t.Errorf("got partitioner %q applied %q absent %q", p.Partitioner, p.Steps[1].ProbeApplied, p.Steps[1].ProbeAbsent)
	}
	p.Steps[1].ProbeAbsent[0] = "CHANGED"
	if defaultProbeAbsent[0] != "NOT_FOUND" {
		t.Errorf("defaults share memory with defaultProbeAbsent")
	}
}

func TestValidateInCode(t *testing.T) {
	c := &Config{Pipelines: []Pipeline{{
		Name: "p", Topic: "t", Group: "g",
		Idempotency: &Idempotency{Table: "idem", Key: "msg_id", BizID: "biz_id", Action: "action"},
		Steps:       []Step{{Name: "s", Kind: KindLocal, Evidence: "SELECT 1 FROM x WHERE a = ?"}},
	}}}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if c.Pipelines[0].Partitioner != PartitionerMurmur2 {
		t.Errorf("Validate did not apply defaults")
	}
	c.Pipelines[0].Steps[0].Kind = "rpc"
	err := c.Validate()
	if err == nil || err.Error() != `config: pipeline "p": step "s": kind "rpc" is not one of local, remote, outbox` {
		t.Errorf("in-code error = %v", err)
	}
}

// TestEntityBatchLookup: entity.table, key and status are decoded, and are
// optional (the base config has none).
func TestEntityBatchLookup(t *testing.T) {
	src := edit(t, baseYAML, map[int]string{44: "      query: \"SELECT status FROM orders WHERE order_id = ?\"\n      table: shop.orders\n      key: order_id\n      status: status"})
	c, err := ParseWithEnv("t.yaml", []byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	e := c.Pipeline("settlement").Entity
	if e.Table != "shop.orders" || e.Key != "order_id" || e.Status != "status" {
		t.Errorf("entity = %+v", e)
	}
	base, err := ParseWithEnv("t.yaml", []byte(baseYAML), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if e := base.Pipeline("settlement").Entity; e.Table != "" || e.Key != "" || e.Status != "" {
		t.Errorf("base entity = %+v, want no batch lookup", e)
	}
}
