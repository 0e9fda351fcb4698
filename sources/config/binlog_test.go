package config

import (
	"strings"
	"testing"
)

// seed000YAML is seed 000's pipeline with a binlog debit; edit replaces a
// line of it (1-based) before parsing.
const seed000YAML = `mysql:
  dsn: "u@tcp(127.0.0.1:3306)/pay"
pipelines:
  - name: settlement
    topic: settlement-event
    group: settlement-consumer
    steps:
      - name: debit
        kind: local
        binlog:
          table: account_balance
          key: account_id
          delta: balance
          message_key: "$.account_id"
          message_delta: "-$.amount"
          transaction: "ledger_entry.biz_order_id"
          window: 10m
        reverse:
          - "UPDATE account_balance SET balance = balance - :delta WHERE account_id = :key"
      - name: ledger
        kind: local
        evidence: "SELECT id, direction, amount, created_at FROM ledger_entry WHERE biz_order_id = ?"
`

func TestBinlogBlock(t *testing.T) {
	cases := []struct {
		name string
		edit map[int]string
		want string // "" = loads; else "line: text"
	}{
		{"seed 000 loads without state or idempotency", nil, ""},
		{"unknown key", map[int]string{13: `          deltaa: balance`}, `13: unknown key "deltaa"`},
		{"table required", map[int]string{11: ``}, `10: pipeline "settlement": step "debit": binlog.table is required`},
		{"bad identifier", map[int]string{12: `          key: "account id"`}, `12: pipeline "settlement": step "debit": binlog.key "account id" is not a valid identifier`},
		{"message_key not a path", map[int]string{14: `          message_key: "account_id"`}, `14: pipeline "settlement": step "debit": binlog.message_key "account_id" is not a JSON path`},
		{"message_delta with a filter", map[int]string{15: `          message_delta: "-$.items[0].amount"`}, `15: pipeline "settlement": step "debit": binlog.message_delta "-$.items[0].amount" is not a JSON path`},
		{"transaction not table.column", map[int]string{16: `          transaction: "ledger_entry"`}, `16: pipeline "settlement": step "debit": binlog.transaction "ledger_entry" must be table.column`},
		{"window too long", map[int]string{17: `          window: 2d`}, `17: pipeline "settlement": step "debit": binlog.window "2d" must be more than 0 and at most 24h`},
		{"window not a duration", map[int]string{17: `          window: soon`}, `17: pipeline "settlement": step "debit": binlog.window: invalid duration "soon"`},
		{"reverse binds a column the binlog has not", map[int]string{19: `          - "UPDATE account_balance SET balance = balance - :amount WHERE account_id = :key"`},
			`19: pipeline "settlement": step "debit": reverse[0] binds :amount, which the evidence does not return`},
		{"both evidence and binlog", map[int]string{9: `        kind: local
        evidence: "SELECT id FROM t WHERE b = ?"`}, `11: pipeline "settlement": step "debit": a step reads its effects from evidence or from binlog, not both`},
		{"binlog on a remote step", map[int]string{9: `        kind: remote
        probe: "http://x/{biz_id}"`}, `binlog is only for local steps`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lines := strings.Split(seed000YAML, "\n")
			for n, l := range c.edit {
				lines[n-1] = l
			}
			cfg, err := Parse("opctl.yaml", []byte(strings.Join(lines, "\n")))
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				b := cfg.Pipelines[0].Steps[0].Binlog
				if tb, col := b.TransactionTable(); tb != "ledger_entry" || col != "biz_order_id" || b.WindowDuration().Minutes() != 10 {
					t.Fatalf("binlog %+v", b)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v\nwant %q", err, c.want)
			}
		})
	}
}

func TestBinlogDSN(t *testing.T) {
	cfg, err := Parse("opctl.yaml", []byte(strings.Replace(seed000YAML, "mysql:\n", "mysql:\n  binlog_dsn: \"repl:s3cret@tcp(db:3306)\"\n  server_id: 4001\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MySQL.ServerID != 4001 {
		t.Fatalf("server_id %d", cfg.MySQL.ServerID)
	}
	err = cfg.ValidateMySQL()
	if err == nil || !strings.Contains(err.Error(), "mysql.binlog_dsn") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("ValidateMySQL = %v: want the binlog DSN's problem, without its password", err)
	}
	if cfg.MySQL.EffectiveBinlogDSN() != "repl:s3cret@tcp(db:3306)" {
		t.Fatal("EffectiveBinlogDSN")
	}
	cfg.MySQL.BinlogDSN = ""
	if cfg.MySQL.EffectiveBinlogDSN() != cfg.MySQL.DSN {
		t.Fatal("EffectiveBinlogDSN defaults to dsn")
	}
}

func TestMessagePath(t *testing.T) {
	cases := []struct {
		path   string
		signed bool
		msg    string
		want   string
		err    string
	}{
		{"$.account_id", false, `{"account_id": 1001}`, "1001", ""},
		{"$.account_id", false, `{"account_id": "账户-1"}`, "账户-1", ""},
		{"-$.amount", true, `{"amount": "30.00"}`, "-30.00", ""},
		{"-$.amount", true, `{"amount": 12345678901234567890.1234567891}`, "-12345678901234567890.1234567891", ""},
		{"-$.amount", true, `{"amount": -5}`, "5", ""},
		{"$.pay.amount", true, `{"pay": {"amount": "1.5"}}`, "1.5", ""},
		{"$.pay.amount", true, `{"pay": 3}`, "", "$.pay is not an object"},
		{"$.amount", true, `{"x": 1}`, "", "the message has no $.amount"},
		{"$.amount", true, `{"amount": true}`, "", "$.amount is bool"},
		{"$.amount", true, `not json`, "", "the message is not JSON"},
	}
	for _, c := range cases {
		t.Run(c.path+" "+c.msg, func(t *testing.T) {
			mp, p := ParseMessagePath(c.path, c.signed)
			if p != "" {
				t.Fatal(p)
			}
			got, err := mp.Lookup([]byte(c.msg))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Lookup = %q, %v; want %q", got, err, c.want)
			}
		})
	}
	for _, bad := range []string{"", "$", "$.", "$..a", "account_id", "$.a[0]", "-$.a"} {
		if _, p := ParseMessagePath(bad, false); p == "" {
			t.Errorf("ParseMessagePath(%q) accepted", bad)
		}
	}
}

// FuzzMessagePath: a Kafka message is outside input; no path and no
// message may make the lookup panic.
//
//	go test -run '^$' -fuzz '^FuzzMessagePath$' -fuzztime 1m -parallel 1 ./sources/config/
func FuzzMessagePath(f *testing.F) {
	f.Add("-$.amount", `{"amount":"30.00"}`)
	f.Add("$.a.b", `{"a":{"b":[1,2]}}`)
	f.Add("$.a", `{"a":1e400}`)
	f.Fuzz(func(t *testing.T, path, msg string) {
		mp, p := ParseMessagePath(path, true)
		if p != "" {
			return
		}
		if _, err := mp.Lookup([]byte(msg)); err != nil && err.Error() == "" {
			t.Fatal("empty error")
		}
	})
}
