// Package config loads and validates opctl.yaml (docs/config.md).
//
// The types in this file are the parsed configuration. Load fills them from a
// file, expands ${VAR} references from the environment, and validates every
// pipeline before any command runs, so that later code may trust that every
// identifier is safe to backquote and every pipeline is coherent.
package config

import (
	"fmt"
	"slices"
	"strings"
)

// Config is one parsed and validated opctl.yaml.
type Config struct {
	// Path is the file the configuration was read from ("" when built in code).
	Path      string     `yaml:"-" json:"-"`
	MySQL     MySQL      `yaml:"mysql"`
	Kafka     Kafka      `yaml:"kafka"`
	Audit     Audit      `yaml:"audit"`
	Sop       Sop        `yaml:"sop"`
	Pipelines []Pipeline `yaml:"pipelines"`

	// meta records where each value came from (lines, unset ${VAR}s); nil
	// for a Config built in code.
	meta *meta
}

// MySQL holds the connection strings. DSNs are go-sql-driver/mysql DSNs.
type MySQL struct {
	// DSN is the read path; it may be a user with only SELECT.
	DSN string `yaml:"dsn"`
	// WriteDSN is used only by commands that write; it defaults to DSN.
	WriteDSN string `yaml:"write_dsn"`
	// TimeZone is the session time zone the consumers write DATETIMEs in
	// (see ParseTimeZone); "" is the server's @@global.time_zone.
	TimeZone string `yaml:"time_zone"`
	// BinlogDSN is the server and user the binlog is read from as a replica
	// (REPLICATION SLAVE, REPLICATION CLIENT); it defaults to DSN.
	BinlogDSN string `yaml:"binlog_dsn"`
	// ServerID is the replica server id of the binlog connection; 0 picks a
	// random one in [2^31, 2^32).
	ServerID uint32 `yaml:"server_id"`
}

// Kafka describes how to reach the cluster the pipelines consume from.
type Kafka struct {
	Brokers  []string `yaml:"brokers"`
	Version  string   `yaml:"version"`
	ClientID string   `yaml:"client_id"`
	// IsolationLevel is what the consumers read: read_committed or
	// read_uncommitted ("" is Kafka's consumer default, read_uncommitted).
	// The message search sees what they see (docs/where.md).
	IsolationLevel string `yaml:"isolation_level"`
	TLS            *TLS   `yaml:"tls"`
	SASL           *SASL  `yaml:"sasl"`
}

// Isolation levels of kafka.isolation_level.
const (
	ReadUncommitted = "read_uncommitted"
	ReadCommitted   = "read_committed"
)

// EffectiveIsolationLevel is kafka.isolation_level, read_uncommitted (Kafka's
// consumer default) when empty.
func (k Kafka) EffectiveIsolationLevel() string {
	if k.IsolationLevel == "" {
		return ReadUncommitted
	}
	return k.IsolationLevel
}

// TLS enables TLS to the brokers.
type TLS struct {
	Enabled            bool   `yaml:"enabled"`
	CAFile             string `yaml:"ca_file"`
	CertFile           string `yaml:"cert_file"`
	KeyFile            string `yaml:"key_file"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// SASL enables SASL authentication to the brokers.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism string `yaml:"mechanism"`
	User      string `yaml:"user"`
	Password  string `yaml:"password"`
}

// Audit names where opctl records what it changed.
type Audit struct {
	// Table is the audit table; the attempt table is Table + "_attempt".
	Table string `yaml:"table"`
	// File is an optional JSONL mirror of the audit rows.
	File string `yaml:"file"`
}

// Sop says where the team's runbooks and the records of runbook runs are
// (docs/runbooks.md).
type Sop struct {
	// Dir holds runbooks (*.yaml) added to, and overriding by name, the
	// built-in ones; relative to the config file's directory.
	Dir string `yaml:"dir"`
	// RunsDir is where runbook runs are recorded (default:
	// $XDG_STATE_HOME/opctl/runs); relative to the config file's directory.
	RunsDir string `yaml:"runs_dir"`
}

// Pipeline is one consumer's processing of one topic.
type Pipeline struct {
	Name         string `yaml:"name"`
	Topic        string `yaml:"topic"`
	Group        string `yaml:"group"`
	Partitioner  string `yaml:"partitioner"`   // murmur2 (default, when empty) | fnv1a | crc32 | stored
	MessageKey   string `yaml:"message_key"`   // template, e.g. "{biz_id}"
	RedriveTopic string `yaml:"redrive_topic"` // defaults to Topic
	OffsetReset  string `yaml:"offset_reset"`  // latest (default) | earliest
	// Retention is how long the consumers keep state and idempotency rows
	// ("30d"); opctl doctor compares it with the topic's retention.ms and
	// the broker's offsets.retention.minutes (docs/doctor.md).
	Retention string `yaml:"retention" json:",omitempty"`
	// Commit is when the consumer commits a message's offset: after_steps
	// (the default: only after every step succeeded), before_steps, or
	// auto (auto-commit: a commit proves nothing). Under after_steps a
	// commit past the message is the consumer's statement that every step
	// ran (docs/config.md#pipelines).
	Commit string `yaml:"commit" json:",omitempty"`
	// HonoursOpctlHeaders says the consumer acts on opctl's replay headers
	// (opctl-from-step, opctl-force-effect: docs/design.md). Without it a
	// republish is read as a plain redelivery, which the consumer's own
	// rules may skip or redo from the first step.
	HonoursOpctlHeaders bool `yaml:"honours_opctl_headers" json:",omitempty"`
	// MySQL overrides the top-level mysql block for this pipeline's
	// tables (dsn, write_dsn, binlog_dsn, time_zone): pipelines on
	// different clusters in one file. Nil: the top-level block.
	MySQL *PipelineMySQL `yaml:"mysql" json:",omitempty"`

	// State is the per-operation anchor row. It is optional: a consumer that
	// only records idempotency decisions (seed 003) has none.
	State *State `yaml:"state"`
	Steps []Step `yaml:"steps"`
	// Idempotency is the consumer's per-message record; optional.
	Idempotency *Idempotency `yaml:"idempotency"`
	// Entity is the business object a skip decision looked at; optional.
	Entity *Entity `yaml:"entity"`
}

// Commit policies of pipelines[].commit.
const (
	CommitAfterSteps  = "after_steps"
	CommitBeforeSteps = "before_steps"
	CommitAuto        = "auto"
)

// EffectiveCommit is the pipeline's commit policy, after_steps by default.
func (p *Pipeline) EffectiveCommit() string {
	if p.Commit == "" {
		return CommitAfterSteps
	}
	return p.Commit
}

// PipelineMySQL is a pipeline's override of the top-level mysql block:
// every key it sets replaces the top-level one for this pipeline.
type PipelineMySQL struct {
	DSN       string `yaml:"dsn"`
	WriteDSN  string `yaml:"write_dsn"`
	BinlogDSN string `yaml:"binlog_dsn"`
	TimeZone  string `yaml:"time_zone"`
}

// MySQLFor is the mysql block pipeline p uses: the top-level one with p's
// overrides (pipelines[].mysql) applied. A pipeline that overrides dsn
// but not write_dsn or binlog_dsn writes and reads the binlog through its
// own dsn, never the top-level server's.
func (c *Config) MySQLFor(p *Pipeline) MySQL {
	m := c.MySQL
	o := p.MySQL
	if o == nil {
		return m
	}
	if o.DSN != "" {
		m.DSN = o.DSN
		m.WriteDSN, m.BinlogDSN = "", ""
	}
	if o.WriteDSN != "" {
		m.WriteDSN = o.WriteDSN
	}
	if o.BinlogDSN != "" {
		m.BinlogDSN = o.BinlogDSN
	}
	if o.TimeZone != "" {
		m.TimeZone = o.TimeZone
	}
	return m
}

// State names the state table and its columns. Empty optional columns are
// simply not read.
type State struct {
	Table      string   `yaml:"table"`
	Key        string   `yaml:"key"`
	Status     string   `yaml:"status"`
	Version    string   `yaml:"version"`
	Owner      string   `yaml:"owner"`
	LeaseUntil string   `yaml:"lease_until"`
	Partition  string   `yaml:"partition"`
	Offset     string   `yaml:"offset"`
	MsgID      string   `yaml:"msg_id"`
	CreatedAt  string   `yaml:"created_at"`
	UpdatedAt  string   `yaml:"updated_at"`
	Initial    []string `yaml:"initial"`
	Terminal   []string `yaml:"terminal"`
	Failed     []string `yaml:"failed"`
}

// Step kinds.
const (
	KindLocal  = "local"
	KindRemote = "remote"
	KindOutbox = "outbox"
)

// Step is one business step of a pipeline.
type Step struct {
	Name string `yaml:"name"`
	Kind string `yaml:"kind"` // local | remote | outbox
	// Idempotent marks a step that a redelivery cannot repeat: a remote
	// step whose downstream dedupes repeated calls (repeated effects of such
	// a step are not a DUPLICATE_EFFECT), or a local or outbox step whose
	// write a unique key stops (seed 000's ledger_entry). Verdicts and
	// plans use it to say what a redelivery or a republish would redo.
	Idempotent bool   `yaml:"idempotent"`
	DoneStatus string `yaml:"done_status"`
	// Evidence is a SELECT with one `?` (the biz_id) whose rows prove the
	// effect; the first column is the row's identity.
	Evidence string `yaml:"evidence"`
	Scan     *Scan  `yaml:"scan"`
	// Binlog reads the step's effects from the binlog's row changes instead
	// of an evidence query (docs/config.md#binlog).
	Binlog *Binlog `yaml:"binlog"`
	// Reverse is a list of statements run in one transaction, bound from one
	// evidence row (:col) and :biz_id.
	Reverse []string `yaml:"reverse"`
	// Intent is a SELECT with one `?` returning request_id, sent_at,
	// acked_at, result (by those names) for a remote step.
	Intent       string   `yaml:"intent"`
	Probe        string   `yaml:"probe"` // GET template with {request_id} or {biz_id}
	ProbeApplied []string `yaml:"probe_applied"`
	ProbeAbsent  []string `yaml:"probe_absent"`
	Compensate   string   `yaml:"compensate"`
	// Redrive is an HTTP POST template ({biz_id}, {request_id}) that makes
	// the step's effect at the downstream: the forward twin of Compensate,
	// for an effect the consumer will not redo by itself (seed 003's
	// points grant behind a SKIPPED record).
	Redrive string `yaml:"redrive" json:",omitempty"`
	// HonoursIdempotencyKey says that the step's downstream deduplicates
	// the POSTs opctl sends it (compensate) by their Idempotency-Key
	// header: a POST whose outcome is unknown is settled by sending it
	// again with the same key (docs/config.md, docs/repair.md). omitempty:
	// a pipeline without it keeps its configuration fingerprint.
	HonoursIdempotencyKey bool `yaml:"honours_idempotency_key" json:",omitempty"`
}

// Unverified reports whether s is a remote step with neither intent nor
// probe: opctl cannot see its effect (docs/verdicts.md#unverified-steps).
func (s *Step) Unverified() bool {
	return s.Kind == KindRemote && s.Intent == "" && s.Probe == ""
}

// Scan lets reconcile scan a step's effects table-wide.
type Scan struct {
	Table string `yaml:"table"`
	Key   string `yaml:"key"`
	Time  string `yaml:"time"`
}

// Idempotency names the consumer's per-message record table.
type Idempotency struct {
	Table string `yaml:"table"`
	Key   string `yaml:"key"`
	// BizID is the column holding the operation's biz_id; optional: without
	// it the records are linked to the operation through its messages
	// (their msg_id header, or MsgIDPath into the value).
	BizID     string `yaml:"biz_id"`
	Action    string `yaml:"action"`
	CreatedAt string `yaml:"created_at"`
	// MsgIDPath is a JSON path into a message's value holding its msg id
	// ("$.msg_id"), for messages without a msg_id header.
	MsgIDPath string `yaml:"msg_id_path" json:",omitempty"`
	// Reopen is how flip_skipped reopens a SKIPPED record: "pending" (set
	// the action to PENDING) or "delete" (delete the record, its whole row
	// kept in the audit). Empty: pending when the action column can hold
	// PENDING, else delete (docs/repair.md#reopening-a-skipped-record).
	Reopen string `yaml:"reopen" json:",omitempty"`
}

// Reopen policies of idempotency.reopen.
const (
	ReopenPending = "pending"
	ReopenDelete  = "delete"
)

// Entity is the business object whose status a skip decision read.
type Entity struct {
	// Query is a SELECT with one `?` (the biz_id) whose first column is the
	// entity's status. A second column that is a DATETIME is a time of the
	// entity that anchors the message search of an operation with no
	// other timestamp (seed 003's orders.updated_at: docs/where.md).
	Query string `yaml:"query"`
	// Table, Key and Status (all or none) name the entity table, the column
	// holding the biz_id and the status column: the same row Query reads.
	// When set, reconcile's skipped check reads the status of a whole chunk
	// of candidates in one statement and triages only those whose status
	// does not cancel the effect.
	Table  string `yaml:"table"`
	Key    string `yaml:"key"`
	Status string `yaml:"status"`
	// UpdatedAt (optional, with Table and Key) is the entity table's time
	// column that a status change moves: `opctl watch` polls it, so that
	// an entity's status change re-triages its SKIPPED records when no
	// binlog is read (docs/watch.md#polling).
	UpdatedAt  string   `yaml:"updated_at"`
	Lifecycle  []string `yaml:"lifecycle"`
	Cancels    []string `yaml:"cancels"`
	EffectStep string   `yaml:"effect_step"`
}

// Stated reports whether the file gave the value at path (a value path
// such as "pipelines[0].offset_reset"), rather than a default filling it.
// A Config built in code states nothing.
func (c *Config) Stated(path string) bool {
	if c.meta == nil {
		return false
	}
	_, ok := c.meta.lines[path]
	return ok
}

// Pipeline returns the pipeline with the given name, or nil.
func (c *Config) Pipeline(name string) *Pipeline {
	for i := range c.Pipelines {
		if c.Pipelines[i].Name == name {
			return &c.Pipelines[i]
		}
	}
	return nil
}

// Select returns the pipeline named name (--pipeline), or every pipeline in
// file order when name is empty. An unknown name is a *PipelineError.
func (c *Config) Select(name string) ([]*Pipeline, error) {
	if name == "" {
		out := make([]*Pipeline, len(c.Pipelines))
		for i := range c.Pipelines {
			out[i] = &c.Pipelines[i]
		}
		return out, nil
	}
	if p := c.Pipeline(name); p != nil {
		return []*Pipeline{p}, nil
	}
	return nil, &PipelineError{Name: name, Path: c.Path, Have: c.PipelineNames()}
}

// PipelineError is a --pipeline that the configuration does not have.
type PipelineError struct {
	Name, Path string
	Have       []string
}

// Error names the pipelines there are.
func (e *PipelineError) Error() string {
	return fmt.Sprintf("--pipeline %q: no such pipeline in %s (have: %s)", e.Name, e.Path, strings.Join(e.Have, ", "))
}

// ExitCode is exit 2: a usage error (docs/exit-codes.md).
func (e *PipelineError) ExitCode() int { return 2 }

// PipelineNames lists the configured pipeline names in file order.
func (c *Config) PipelineNames() []string {
	out := make([]string, len(c.Pipelines))
	for i, p := range c.Pipelines {
		out[i] = p.Name
	}
	return out
}

// leavesEvidence reports whether a step of p leaves something opctl can
// read: evidence rows, binlog changes, intents or a probe's answer.
func (p *Pipeline) leavesEvidence() bool {
	for _, s := range p.Steps {
		if s.Evidence != "" || s.Binlog != nil || s.Intent != "" || s.Probe != "" {
			return true
		}
	}
	return false
}

// StepIndex returns the 0-based index of the named step, or -1.
func (p *Pipeline) StepIndex(name string) int {
	for i, s := range p.Steps {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// EffectiveRedriveTopic is where replays are published.
func (p *Pipeline) EffectiveRedriveTopic() string {
	if p.RedriveTopic != "" {
		return p.RedriveTopic
	}
	return p.Topic
}

// EffectiveOffsetReset is the consumer's auto.offset.reset, "latest" by default.
func (p *Pipeline) EffectiveOffsetReset() string {
	if p.OffsetReset == "" {
		return "latest"
	}
	return p.OffsetReset
}

// EffectiveWriteDSN is WriteDSN, or DSN when WriteDSN is empty.
func (m MySQL) EffectiveWriteDSN() string {
	if m.WriteDSN != "" {
		return m.WriteDSN
	}
	return m.DSN
}

// AuditTable is the configured audit table, opctl_audit by default.
func (a Audit) AuditTable() string {
	if a.Table != "" {
		return a.Table
	}
	return "opctl_audit"
}

// AttemptTable is the audit attempt table: the audit table + "_attempt".
func (a Audit) AttemptTable() string { return a.AuditTable() + "_attempt" }

// EnumValues returns the values of a column type written as
// information_schema.COLUMNS.COLUMN_TYPE writes an ENUM ("enum('DONE',
// 'SKIPPED')"; quotes doubled inside a value), and whether it is one.
func EnumValues(columnType string) ([]string, bool) {
	t := strings.TrimSpace(columnType)
	if len(t) < 6 || !strings.EqualFold(t[:5], "enum(") || !strings.HasSuffix(t, ")") {
		return nil, false
	}
	body := t[5 : len(t)-1]
	var out []string
	for i := 0; i < len(body); {
		if body[i] != '\'' {
			return nil, false
		}
		var v strings.Builder
		j := i + 1
		for ; j < len(body); j++ {
			if body[j] == '\'' {
				if j+1 < len(body) && body[j+1] == '\'' {
					v.WriteByte('\'')
					j++
					continue
				}
				break
			}
			v.WriteByte(body[j])
		}
		if j >= len(body) {
			return nil, false
		}
		out = append(out, v.String())
		i = j + 1
		if i < len(body) {
			if body[i] != ',' {
				return nil, false
			}
			i++
		}
	}
	return out, true
}

// ReopenFor decides how flip_skipped reopens a SKIPPED record of a table
// whose action column has type columnType (information_schema's
// COLUMN_TYPE; "" when it could not be read): idempotency.reopen when
// set, else pending when the column can hold PENDING (not an ENUM, or an
// ENUM with PENDING) and delete when it cannot
// (docs/repair.md#reopening-a-skipped-record). problem says why neither
// can be used: reopen: pending on an ENUM without PENDING.
func ReopenFor(id *Idempotency, columnType string) (mode, problem string) {
	vals, isEnum := EnumValues(columnType)
	holdsPending := !isEnum || slices.Contains(vals, "PENDING")
	switch {
	case id.Reopen == ReopenDelete:
		return ReopenDelete, ""
	case id.Reopen == ReopenPending && isEnum && !holdsPending:
		return "", fmt.Sprintf("idempotency.reopen is pending, but %s.%s is %s, which cannot hold PENDING: set reopen: delete, or add PENDING to the ENUM", id.Table, id.Action, columnType)
	case id.Reopen == ReopenPending, holdsPending:
		// A type that was not read ("") is taken to hold PENDING: apply
		// reads it again, and a plan whose reading differs is stale.
		return ReopenPending, ""
	}
	return ReopenDelete, ""
}
