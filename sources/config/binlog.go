package config

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Binlog is a step's `binlog` block: its effects are the row changes of
// Table read from the binlog (docs/config.md#binlog).
type Binlog struct {
	// Table is the changed table (schema.table, or the binlog DSN's database).
	Table string `yaml:"table"`
	// Key is the changed row's identity column.
	Key string `yaml:"key"`
	// Delta is the column whose after − before is the effect's size.
	Delta string `yaml:"delta"`
	// MessageKey is a JSON path into the operation's Kafka message ("$.account_id"):
	// which row the operation changes.
	MessageKey string `yaml:"message_key"`
	// MessageDelta is a JSON path, optionally negated ("-$.amount"): the
	// delta one effect makes.
	MessageDelta string `yaml:"message_delta"`
	// Transaction ("table.column") is optional: a row of that table whose
	// column holds an operation's biz_id, written in the same transaction as
	// a change, ties the change to that operation.
	Transaction string `yaml:"transaction"`
	// Window is how long after the operation's first timestamp to look
	// (default 10m; s, m, h, d).
	Window string `yaml:"window"`
}

// DefaultBinlogWindow is the window of a binlog block without `window`.
const DefaultBinlogWindow = 10 * time.Minute

// MaxBinlogWindow bounds `window`: a triage reads only the window's files.
const MaxBinlogWindow = 24 * time.Hour

// WindowDuration is Window parsed, DefaultBinlogWindow when empty (Load
// has checked it).
func (b *Binlog) WindowDuration() time.Duration {
	if b.Window == "" {
		return DefaultBinlogWindow
	}
	d, err := ParseDuration(b.Window)
	if err != nil {
		return DefaultBinlogWindow
	}
	return d
}

// TransactionTable and TransactionColumn split Transaction
// ("ledger_entry.biz_order_id", or "schema.table.column"); both are "" when
// it is not set.
func (b *Binlog) TransactionTable() (table, column string) {
	i := strings.LastIndexByte(b.Transaction, '.')
	if i < 0 {
		return "", ""
	}
	return b.Transaction[:i], b.Transaction[i+1:]
}

// UsesBinlog reports whether a step of p reads its effects from the binlog:
// such a pipeline needs no state or idempotency table (seed 000's schema has
// neither; the binlog and the evidence say what happened).
func (p *Pipeline) UsesBinlog() bool {
	for _, s := range p.Steps {
		if s.Binlog != nil {
			return true
		}
	}
	return false
}

// EffectiveBinlogDSN is BinlogDSN, or DSN when BinlogDSN is empty.
func (m MySQL) EffectiveBinlogDSN() string {
	if m.BinlogDSN != "" {
		return m.BinlogDSN
	}
	return m.DSN
}

// binlogReverseParams are the :names a reverse statement of a binlog step
// may bind besides :biz_id: the changed row's key and the change's delta
// (docs/config.md#binlog).
var binlogReverseParams = []string{"key", "delta"}

// binlog checks a step's binlog block.
func (v *validator) binlog(s *Step, sp, sl string) {
	b, bp := s.Binlog, sp+".binlog"
	if s.Kind != KindLocal {
		v.at(bp, "%sbinlog is only for local steps (this step is %s)", sl, s.Kind)
	}
	if s.Evidence != "" {
		v.at(bp, "%sa step reads its effects from evidence or from binlog, not both: with both, each effect would be counted twice", sl)
	}
	v.ident(bp+".table", sl, "binlog.table", b.Table, true, false)
	v.ident(bp+".key", sl, "binlog.key", b.Key, true, true)
	v.ident(bp+".delta", sl, "binlog.delta", b.Delta, true, true)
	if v.required(bp+".message_key", sl, "binlog.message_key", b.MessageKey) {
		if _, p := ParseMessagePath(b.MessageKey, false); p != "" {
			v.at(bp+".message_key", "%sbinlog.message_key %q %s", sl, b.MessageKey, p)
		}
	}
	if v.required(bp+".message_delta", sl, "binlog.message_delta", b.MessageDelta) {
		if _, p := ParseMessagePath(b.MessageDelta, true); p != "" {
			v.at(bp+".message_delta", "%sbinlog.message_delta %q %s", sl, b.MessageDelta, p)
		}
	}
	if b.Transaction != "" {
		t, c := b.TransactionTable()
		if t == "" || !ValidIdent(t) || !ValidIdent(c) {
			v.at(bp+".transaction", "%sbinlog.transaction %q must be table.column (or schema.table.column) of valid identifiers, e.g. ledger_entry.biz_order_id", sl, b.Transaction)
		}
	}
	if b.Window != "" {
		d, err := ParseDuration(b.Window)
		switch {
		case err != nil:
			v.at(bp+".window", "%sbinlog.window: %v", sl, err)
		case d <= 0 || d > MaxBinlogWindow:
			v.at(bp+".window", "%sbinlog.window %q must be more than 0 and at most 24h: a triage reads every binlog event of the window", sl, b.Window)
		}
	}
}

// MessagePath is a parsed binlog.message_key or message_delta: a JSON path
// of object fields ($.a.b), negated with a leading "-" (a delta only).
type MessagePath struct {
	Fields []string
	Negate bool
}

// ParseMessagePath reads "$.field[.field...]", with a leading "-" when
// signed is true. The problem reads after the value.
func ParseMessagePath(s string, signed bool) (MessagePath, string) {
	var mp MessagePath
	t := s
	if signed && strings.HasPrefix(t, "-") {
		mp.Negate, t = true, t[1:]
	}
	want := "is not a JSON path of object fields such as $.account_id"
	if signed {
		want = "is not a JSON path of object fields such as $.amount, or -$.amount for the opposite sign"
	}
	if !strings.HasPrefix(t, "$.") {
		return mp, want
	}
	for _, f := range strings.Split(t[2:], ".") {
		if f == "" || strings.ContainsAny(f, "[]*\"' ") {
			return mp, want
		}
		mp.Fields = append(mp.Fields, f)
	}
	return mp, ""
}

// Lookup reads the path from a JSON message: a string as it is, a number
// exactly as written (negated when the path says so), anything else an
// error saying what was found.
func (mp MessagePath) Lookup(msg []byte) (string, error) {
	var cur any
	dec := json.NewDecoder(strings.NewReader(string(msg)))
	dec.UseNumber()
	if err := dec.Decode(&cur); err != nil {
		return "", fmt.Errorf("the message is not JSON: %v", err)
	}
	path := "$"
	for _, f := range mp.Fields {
		obj, ok := cur.(map[string]any)
		if !ok {
			return "", fmt.Errorf("%s is not an object", path)
		}
		path += "." + f
		if cur, ok = obj[f]; !ok {
			return "", fmt.Errorf("the message has no %s", path)
		}
	}
	var out string
	switch x := cur.(type) {
	case string:
		out = x
	case json.Number:
		out = x.String()
	default:
		return "", fmt.Errorf("%s is %T, not a string or a number", path, cur)
	}
	if mp.Negate {
		out = NegateDecimal(out)
	}
	return out, nil
}

// NegateDecimal flips the sign of a decimal written in text ("30.00" →
// "-30.00", "-5" → "5"), exactly.
func NegateDecimal(s string) string {
	switch {
	case strings.HasPrefix(s, "-"):
		return s[1:]
	case strings.HasPrefix(s, "+"):
		return "-" + s[1:]
	}
	return "-" + s
}
