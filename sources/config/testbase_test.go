package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// baseYAML is a valid configuration exercising every block. Validation
// tests edit single lines of it, so the line numbers below are part of the
// tests: do not insert or remove lines.
const baseYAML = `mysql:
  dsn: "u:p@tcp(127.0.0.1:3306)/db"
kafka:
  brokers: ["127.0.0.1:9092"]
  version: "3.5.0"
audit:
  table: opctl_audit
pipelines:
  - name: settlement
    topic: settlement-event
    group: settlement-consumer
    partitioner: murmur2
    message_key: "{biz_id}"
    offset_reset: latest
    state:
      table: biz_operation
      key: biz_id
      status: status
      partition: src_partition
      offset: src_offset
      initial: [INIT]
      terminal: [DONE]
      failed: [FAILED]
    steps:
      - name: debit
        kind: local
        done_status: DEBIT_DONE
        evidence: "SELECT id, account_id, delta FROM balance_journal WHERE biz_id = ?"
        scan: {table: balance_journal, key: biz_id, time: created_at}
        reverse:
          - "UPDATE account_balance SET balance = balance - :delta WHERE account_id = :account_id"
      - name: notify
        kind: remote
        done_status: DONE
        intent: "SELECT request_id, sent_at, acked_at, result FROM step_intent WHERE biz_id = ?"
        probe: "http://127.0.0.1:8081/notify/status?request_id={request_id}"
        compensate: "http://127.0.0.1:8081/notify/cancel?request_id={request_id}"
    idempotency:
      table: consumer_idempotency
      key: msg_id
      biz_id: biz_id
      action: action
    entity:
      query: "SELECT status FROM orders WHERE order_id = ?"
      lifecycle: [CREATED, PAID]
      cancels: [REFUNDED]
      effect_step: debit
`

// edit replaces whole 1-based lines of src. A replacement of "" blanks the
// line (removing the key while keeping every other line number).
func edit(t *testing.T, src string, edits map[int]string) string {
	t.Helper()
	lines := strings.Split(src, "\n")
	for n, text := range edits {
		if n < 1 || n > len(lines) || strings.TrimSpace(lines[n-1]) == "" {
			t.Fatalf("edit: line %d does not exist in the base config", n)
		}
		lines[n-1] = text
	}
	return strings.Join(lines, "\n")
}

// wantErr is one expected error: its line and a part of its message.
type wantErr struct {
	line int
	sub  string
}

// checkErrs asserts that err is an ErrorList with exactly the wanted
// errors, in order, each rendered as "config t.yaml:LINE: ...".
func checkErrs(t *testing.T, err error, want []wantErr) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("want a valid configuration, got: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error; want %d", len(want))
	}
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error %T is not an ErrorList: %v", err, err)
	}
	if len(list) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(list), len(want), err)
	}
	for i, w := range want {
		got := list[i].Error()
		prefix := fmt.Sprintf("config t.yaml:%d: ", w.line)
		if list[i].Line != w.line || !strings.HasPrefix(got, prefix) {
			t.Errorf("error %d: %q: want line %d", i, got, w.line)
		}
		if !strings.Contains(got, w.sub) {
			t.Errorf("error %d: %q: want it to contain %q", i, got, w.sub)
		}
	}
	if t.Failed() {
		t.Logf("all errors:\n%v", err)
	}
}

// noEnv is a lookup with no variable set.
func noEnv(string) (string, bool) { return "", false }

// envMap is a lookup over a map.
func envMap(m map[string]string) LookupFunc {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}
