// Package doctor judges a configuration against the live systems: given
// the facts the drivers read (sources.DoctorFacts), Judge says for each
// pipeline and check whether it passes, warns, fails or was skipped, and
// what to do about it (docs/doctor.md). It does no I/O: every rule is a
// pure function over plain structs, tested with tables of cases.
package doctor

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Statuses of a check.
const (
	Pass = "pass"
	Warn = "warn"
	Fail = "fail"
	Skip = "skip"
)

// Check names (docs/doctor.md), in the order Judge reports them.
const (
	CheckTables         = "tables"
	CheckColumns        = "columns"
	CheckIndexes        = "indexes"
	CheckGrants         = "grants"
	CheckTopic          = "topic"
	CheckGroup          = "group"
	CheckPartitioner    = "partitioner"
	CheckRetention      = "retention"
	CheckOffsetReset    = "offset_reset"
	CheckIsolationLevel = "isolation_level"
	CheckTimeZone       = "time_zone"
	CheckBinlog         = "binlog"
	// Checks of what a config says of the consumer (docs/doctor.md).
	CheckCommit     = "commit"
	CheckUnverified = "unverified"
	CheckReopen     = "reopen"
	CheckHeaders    = "headers"
)

// Checks lists the check names in order.
func Checks() []string {
	return []string{CheckTables, CheckColumns, CheckIndexes, CheckGrants, CheckTopic, CheckGroup, CheckPartitioner,
		CheckRetention, CheckOffsetReset, CheckIsolationLevel, CheckTimeZone, CheckBinlog,
		CheckCommit, CheckUnverified, CheckReopen, CheckHeaders}
}

// Result is one check of one pipeline.
type Result struct {
	Pipeline string `json:"pipeline"`
	Check    string `json:"check"`
	Status   string `json:"status"`
	Detail   string `json:"detail"`
	// Fix says what to do; "" for a pass.
	Fix string `json:"fix"`
}

// Report is every check of every pipeline judged.
type Report struct {
	Checks []Result `json:"checks"`
}

// ExitCode is 3 when a check fails, else 0.
func (r *Report) ExitCode() int {
	for _, c := range r.Checks {
		if c.Status == Fail {
			return sources.ExitAttention
		}
	}
	return sources.ExitOK
}

// Judge judges the pipelines of cfg against f, every check for every
// pipeline, in the order of Checks.
func Judge(cfg *config.Config, pipelines []*config.Pipeline, f sources.DoctorFacts) *Report {
	rep := &Report{}
	for _, p := range pipelines {
		j := judge{cfg: cfg, p: p, f: f, idx: pipelineIndex(cfg, p)}
		for _, c := range j.all() {
			c.Pipeline = p.Name
			if c.Status == Pass {
				c.Fix = ""
			}
			rep.Checks = append(rep.Checks, c)
		}
	}
	return rep
}

func pipelineIndex(cfg *config.Config, p *config.Pipeline) int {
	for i := range cfg.Pipelines {
		if cfg.Pipelines[i].Name == p.Name {
			return i
		}
	}
	return -1
}

type judge struct {
	cfg *config.Config
	p   *config.Pipeline
	f   sources.DoctorFacts
	idx int
}

func (j judge) all() []Result {
	return []Result{j.tables(), j.columns(), j.indexes(), j.grants(), j.topic(), j.group(), j.partitioner(),
		j.retention(), j.offsetReset(), j.isolationLevel(), j.timeZone(), j.binlog(),
		j.commit(), j.unverified(), j.reopen(), j.headers()}
}

// commit: when the consumer commits says what a commit proves
// (docs/verdicts.md#terminal).
func (j judge) commit() Result {
	c := j.p.EffectiveCommit()
	stated := j.cfg.Stated(fmt.Sprintf("pipelines[%d].commit", j.idx))
	switch {
	case c == config.CommitAuto:
		return res(CheckCommit, Warn, "commit: auto: a commit proves nothing, so an operation with no state row is judged by its steps' effects alone, and one that stopped part-way is not told from one still to come",
			"if the consumer can commit after its steps (enable.auto.commit=false, commitSync after the last step), do so and state commit: after_steps")
	case !stated && j.p.State == nil && j.p.Idempotency == nil:
		return res(CheckCommit, Warn, "commit is not stated: opctl assumes after_steps (the offset is committed only after every step), and with no state table a commit past the message is what says an operation ended",
			"state the consumer's policy: commit: after_steps | before_steps | auto")
	}
	return res(CheckCommit, Pass, "commit: "+c+map[bool]string{true: " (stated)", false: " (the default)"}[stated], "")
}

// unverified: remote steps with neither intent nor probe are noted, with
// what a probe would add (docs/verdicts.md#unverified-steps).
func (j judge) unverified() Result {
	var names []string
	for _, s := range j.p.Steps {
		if s.Unverified() {
			names = append(names, s.Name)
		}
	}
	if len(names) == 0 {
		return res(CheckUnverified, Pass, "every remote step has an intent query or a probe", "")
	}
	return res(CheckUnverified, Warn, fmt.Sprintf("remote step(s) %s have neither intent nor probe: opctl cannot see their effects (a double call is never found; a missing one only through the commit)", strings.Join(names, ", ")),
		"if the downstream can list what it did for an operation, give the step a probe keyed by {biz_id} answering {\"count\": N}: opctl then counts its effects and finds a double call (seed 000's risk RPC, seed 001's WMS)")
}

// reopen: how flip_skipped would reopen a SKIPPED record, by the action
// column's declared type (docs/repair.md#reopening-a-skipped-record).
func (j judge) reopen() Result {
	id := j.p.Idempotency
	if id == nil {
		return res(CheckReopen, Skip, "no idempotency table", "")
	}
	if !j.p.HonoursOpctlHeaders {
		return res(CheckReopen, Pass, "the consumer does not honour opctl's headers: a SKIPPED record is never reopened (a swallowed effect is redriven or made by hand, see headers)", "")
	}
	if r, ok := j.noMySQL(CheckReopen); ok {
		return r
	}
	colType := ""
	if t, ok := j.f.Tables[id.Table]; ok {
		for i, c := range t.Columns {
			if strings.EqualFold(c, id.Action) && i < len(t.Types) {
				colType = t.Types[i]
			}
		}
	}
	if colType == "" {
		return res(CheckReopen, Warn, fmt.Sprintf("the type of %s.%s could not be read", id.Table, id.Action), "run opctl schema check")
	}
	mode, problem := config.ReopenFor(id, colType)
	if problem != "" {
		return res(CheckReopen, Fail, problem, "set idempotency.reopen: delete, or add PENDING to the ENUM")
	}
	how := "set to PENDING"
	if mode == config.ReopenDelete {
		how = "deleted, its whole row kept in opctl's audit"
	}
	return res(CheckReopen, Pass, fmt.Sprintf("%s.%s is %s: a SKIPPED record is reopened by flip_skipped as %s (reopen: %s)", id.Table, id.Action, colType, how, mode), "")
}

// headers: whether the consumer acts on opctl's replay headers decides
// which repairs may republish (docs/repair.md#consumers-that-ignore-opctls-headers).
func (j judge) headers() Result {
	if j.p.HonoursOpctlHeaders {
		return res(CheckHeaders, Pass, "honours_opctl_headers: true: a republish resumes at opctl-from-step and forces opctl-force-effect (keep the consumer so)", "")
	}
	var redrive []string
	for _, s := range j.p.Steps {
		if s.Redrive != "" {
			redrive = append(redrive, s.Name)
		}
	}
	d := "honours_opctl_headers is not declared"
	if j.cfg.Stated(fmt.Sprintf("pipelines[%d].honours_opctl_headers", j.idx)) {
		d = "honours_opctl_headers: false"
	}
	d += ": the consumer is taken to read a republished record as a plain redelivery, so a repair republishes only when that redoes nothing that already took effect, and a wrongly skipped effect is "
	if len(redrive) > 0 {
		d += "redriven at the downstream (" + strings.Join(redrive, ", ") + ")"
	} else {
		d += "made by hand (no step has a redrive URL)"
	}
	return res(CheckHeaders, Pass, d, "")
}

func res(check, status, detail, fix string) Result {
	return Result{Check: check, Status: status, Detail: detail, Fix: fix}
}

func (j judge) noMySQL(check string) (Result, bool) {
	if j.f.MySQLErr != "" {
		return res(check, Skip, "MySQL could not be read: "+j.f.MySQLErr, "fix mysql.dsn (or --mysql-dsn) and run opctl doctor again"), true
	}
	return Result{}, false
}

func (j judge) noKafka(check string) (Result, bool) {
	if j.f.KafkaErr != "" {
		return res(check, Skip, "Kafka could not be read: "+j.f.KafkaErr, "fix kafka.brokers (or --brokers) and run opctl doctor again"), true
	}
	return Result{}, false
}

// schema returns the schema facts of the pipeline of kind.
func (j judge) schema(kind string) []sources.SchemaFact {
	var out []sources.SchemaFact
	for _, s := range j.f.Schema {
		if s.Pipeline == j.p.Name && s.Kind == kind {
			out = append(out, s)
		}
	}
	return out
}

// tables: every configured table exists; the SQL snippets prepare.
func (j judge) tables() Result {
	if r, ok := j.noMySQL(CheckTables); ok {
		return r
	}
	var missing, found, bad []string
	for _, s := range j.schema("table") {
		if s.OK {
			found = append(found, s.Table)
		} else {
			missing = append(missing, fmt.Sprintf("%s (%s)", s.Table, s.Why))
		}
	}
	for _, sn := range j.f.Snippets {
		if sn.Pipeline == j.p.Name && sn.Err != "" {
			bad = append(bad, fmt.Sprintf("%s: %s", sn.What, sn.Err))
		}
	}
	switch {
	case len(missing) > 0:
		return res(CheckTables, Fail, "missing: "+strings.Join(missing, "; "),
			"create the tables (opctl schema print shows the recommended DDL) or fix the table names in the config")
	case len(bad) > 0:
		return res(CheckTables, Fail, "SQL that does not prepare on the server: "+strings.Join(bad, "; "),
			"fix the statements in the config (a table, a column, or a SELECT grant of the read user)")
	}
	n := 0
	for _, sn := range j.f.Snippets {
		if sn.Pipeline == j.p.Name {
			n++
		}
	}
	verb := "exist"
	if len(found) == 1 {
		verb = "exists"
	}
	detail := fmt.Sprintf("%s %s; %d SQL snippet(s) prepare", strings.Join(found, ", "), verb, n)
	// The audit tables are the configuration's, not a pipeline's (the
	// schema check reports them without one).
	var noAudit []string
	for _, s := range j.f.Schema {
		if s.Pipeline == "" && s.Kind == "table" && !s.OK {
			noAudit = append(noAudit, s.Table)
		}
	}
	if len(noAudit) > 0 {
		return res(CheckTables, Warn, detail+"; the audit tables "+strings.Join(noAudit, ", ")+" do not exist: repair apply refuses to run without them",
			"create them once: opctl schema apply --audit")
	}
	return res(CheckTables, Pass, detail, "")
}

// columns: every configured column exists; a missing one is listed with
// the columns its table has.
func (j judge) columns() Result {
	if r, ok := j.noMySQL(CheckColumns); ok {
		return r
	}
	var missing []string
	n := 0
	for _, s := range j.schema("column") {
		n++
		if s.OK {
			continue
		}
		has := j.f.Tables[s.Table].Columns
		missing = append(missing, fmt.Sprintf("%s.%s (%s; the table has %s)", s.Table, s.What, s.Why, strings.Join(has, ", ")))
	}
	if len(missing) > 0 {
		return res(CheckColumns, Fail, "missing: "+strings.Join(missing, "; "),
			"fix the column names in the config (or add the columns): opctl reads exactly the columns it is told")
	}
	return res(CheckColumns, Pass, fmt.Sprintf("%d configured column(s) exist", n), "")
}

// indexes: what reconcile needs, with the DDL of what is missing.
func (j judge) indexes() Result {
	if r, ok := j.noMySQL(CheckIndexes); ok {
		return r
	}
	var missing, ddl, served []string
	for _, s := range j.schema("index") {
		if s.OK {
			served = append(served, fmt.Sprintf("%s%s by %s", s.Table, s.What, s.Index))
			continue
		}
		missing = append(missing, fmt.Sprintf("%s%s for reconcile %s (%s)", s.Table, s.What, strings.Join(s.Checks, ","), s.Why))
		if d := strings.TrimSuffix(strings.TrimSpace(s.DDL), ";"); d != "" && !slices.Contains(ddl, d) {
			ddl = append(ddl, d)
		}
	}
	if len(missing) > 0 {
		fix := "add them: " + strings.Join(ddl, "; ") + " (or: opctl schema apply --indexes); until then reconcile refuses those checks"
		if len(ddl) == 0 {
			fix = "fix the missing columns first (see columns), then add the indexes opctl schema check names"
		}
		return res(CheckIndexes, Fail, "reconcile cannot walk: "+strings.Join(missing, "; "), fix)
	}
	if len(served) == 0 {
		return res(CheckIndexes, Pass, "reconcile needs no index for this pipeline", "")
	}
	return res(CheckIndexes, Pass, "served: "+strings.Join(served, "; "), "")
}

func (j judge) topic() Result {
	if r, ok := j.noKafka(CheckTopic); ok {
		return r
	}
	pf := j.f.Pipelines[j.p.Name]
	switch {
	case pf.TopicErr != "":
		return res(CheckTopic, Fail, fmt.Sprintf("topic %s: %s", j.p.Topic, pf.TopicErr), "check kafka.brokers and the pipeline's topic")
	case !pf.TopicExists:
		return res(CheckTopic, Fail, fmt.Sprintf("topic %s does not exist on the cluster", j.p.Topic), "fix the pipeline's topic (kafka-topics.sh --list shows the topics)")
	}
	return res(CheckTopic, Pass, fmt.Sprintf("topic %s: %d partitions", j.p.Topic, pf.Partitions), "")
}

func (j judge) group() Result {
	if r, ok := j.noKafka(CheckGroup); ok {
		return r
	}
	pf := j.f.Pipelines[j.p.Name]
	switch {
	case pf.GroupErr != "":
		return res(CheckGroup, Warn, fmt.Sprintf("group %s could not be described: %s", j.p.Group, pf.GroupErr), "check the pipeline's group and the client's DESCRIBE permission on it")
	case pf.GroupState == "" || pf.GroupState == "Dead":
		return res(CheckGroup, Warn, fmt.Sprintf("group %s is not known to the cluster (no committed offsets, no members): every redelivery verdict reads offset_reset", j.p.Group),
			"check the pipeline's group: the consumers' group.id")
	case pf.GroupMembers == 0:
		return res(CheckGroup, Warn, fmt.Sprintf("group %s is %s with no member: no consumer is running", j.p.Group, pf.GroupState), "start the consumers, or expect nothing to be redelivered until they run")
	}
	return res(CheckGroup, Pass, fmt.Sprintf("group %s is %s with %d member(s)", j.p.Group, pf.GroupState, pf.GroupMembers), "")
}

// partitioner: the configured partitioner computes the stored partition
// of sampled state rows.
func (j judge) partitioner() Result {
	if j.p.Partitioner == config.PartitionerStored {
		return res(CheckPartitioner, Skip, "partitioner: stored: the partition comes from the state row", "")
	}
	if j.p.State == nil || j.p.State.Partition == "" {
		return res(CheckPartitioner, Skip, "no state.partition column: no stored partition to compare with", "add state.partition (the consumers' source partition) to let doctor check the partitioner")
	}
	if r, ok := j.noMySQL(CheckPartitioner); ok {
		return r
	}
	if r, ok := j.noKafka(CheckPartitioner); ok {
		return r
	}
	pf := j.f.Pipelines[j.p.Name]
	if pf.SampleErr != "" {
		return res(CheckPartitioner, Warn, "the state rows could not be sampled: "+pf.SampleErr, "check the state table's grants and columns")
	}
	if len(pf.Samples) == 0 || pf.Partitions <= 0 {
		return res(CheckPartitioner, Skip, "no state row with a stored partition to compare with", "")
	}
	match := map[string]int{}
	names := []string{config.PartitionerMurmur2, config.PartitionerFNV1a, config.PartitionerCRC32}
	var firstMiss string
	for _, s := range pf.Samples {
		key := []byte(sources.Expand(j.p.MessageKey, map[string]string{"biz_id": s.BizID, "msg_id": s.MsgID}, false))
		for _, n := range names {
			got, err := sources.PartitionFor(n, key, pf.Partitions)
			if err == nil && got == s.Partition {
				match[n]++
			} else if n == j.p.Partitioner && firstMiss == "" {
				firstMiss = fmt.Sprintf("%s: stored partition %d, %s gives %d", s.BizID, s.Partition, n, got)
			}
		}
	}
	total := len(pf.Samples)
	if match[j.p.Partitioner] == total {
		return res(CheckPartitioner, Pass, fmt.Sprintf("%s computes the stored partition of all %d sampled state rows", j.p.Partitioner, total), "")
	}
	detail := fmt.Sprintf("%s computes the stored partition of %d of %d sampled state rows (%s): every message search of where misses", j.p.Partitioner, match[j.p.Partitioner], total, firstMiss)
	for _, n := range names {
		if n != j.p.Partitioner && match[n] == total {
			return res(CheckPartitioner, Fail, detail+"; "+n+" matches all of them", fmt.Sprintf("set partitioner: %s for pipeline %s (the producers' partitioner)", n, j.p.Name))
		}
	}
	return res(CheckPartitioner, Fail, detail+"; no known partitioner matches all of them",
		"check the producers' partitioner and message_key (the key must be the producers' exact bytes); partitioner: stored reads the partition from the state row")
}

// retention: the pipeline's retention covers the topic's retention.ms and
// the broker's offsets.retention.minutes (seed 000's window).
func (j judge) retention() Result {
	if j.p.Retention == "" {
		return res(CheckRetention, Warn, "retention is not stated: doctor cannot tell whether a redelivered message can find its state and idempotency rows gone",
			fmt.Sprintf("add retention: <how long the consumers keep state and idempotency rows, e.g. 30d> to pipeline %s (docs/design.md#retention)", j.p.Name))
	}
	keep, err := config.ParseDuration(j.p.Retention)
	if err != nil || keep <= 0 {
		return res(CheckRetention, Fail, fmt.Sprintf("retention %q is not a duration", j.p.Retention), "write it as 30d, 720h, ...")
	}
	if r, ok := j.noKafka(CheckRetention); ok {
		return r
	}
	pf := j.f.Pipelines[j.p.Name]
	var short, known []string
	if pf.RetentionErr != "" {
		return res(CheckRetention, Warn, "the topic's retention.ms could not be read: "+pf.RetentionErr, "grant DescribeConfigs on the topic to opctl's Kafka user")
	}
	if pf.Retention < 0 {
		short = append(short, fmt.Sprintf("the topic keeps messages forever (retention.ms -1), longer than any row retention %s", j.p.Retention))
	} else {
		known = append(known, "retention.ms "+days(pf.Retention))
		if pf.Retention > keep {
			short = append(short, fmt.Sprintf("retention %s < the topic's retention.ms %s", j.p.Retention, days(pf.Retention)))
		}
	}
	if j.f.OffsetsRetentionErr == "" && j.f.OffsetsRetention > 0 {
		known = append(known, "offsets.retention.minutes "+days(j.f.OffsetsRetention))
		if j.f.OffsetsRetention > keep {
			short = append(short, fmt.Sprintf("retention %s < the broker's offsets.retention.minutes %s", j.p.Retention, days(j.f.OffsetsRetention)))
		}
	}
	if len(short) > 0 {
		return res(CheckRetention, Fail, strings.Join(short, "; ")+": a message redelivered after its rows expired is processed again from scratch (the idempotency key expired but the offset is still there)",
			"keep state and idempotency rows at least max(retention.ms, offsets.retention.minutes) + a margin (docs/design.md#retention), then raise retention in the config")
	}
	if j.f.OffsetsRetentionErr != "" {
		return res(CheckRetention, Warn, fmt.Sprintf("retention %s ≥ %s; the broker's offsets.retention.minutes could not be read: %s", j.p.Retention, strings.Join(known, ", "), j.f.OffsetsRetentionErr),
			"grant DescribeConfigs on the cluster to opctl's Kafka user")
	}
	return res(CheckRetention, Pass, fmt.Sprintf("retention %s ≥ %s", j.p.Retention, strings.Join(known, ", ")), "")
}

// days renders a duration in days when it is whole days.
func days(d time.Duration) string {
	if d%(24*time.Hour) == 0 && d > 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

func (j judge) offsetReset() Result {
	if !j.cfg.Stated(fmt.Sprintf("pipelines[%d].offset_reset", j.idx)) {
		return res(CheckOffsetReset, Warn, "offset_reset is not stated: opctl assumes Kafka's default, latest, when a group has no committed offset",
			fmt.Sprintf("state the consumers' auto.offset.reset: offset_reset: latest|earliest for pipeline %s", j.p.Name))
	}
	return res(CheckOffsetReset, Pass, "offset_reset: "+j.p.OffsetReset+" (stated; the consumers' own setting cannot be read from the cluster: keep it in step)", "")
}

func (j judge) isolationLevel() Result {
	if j.cfg.Kafka.IsolationLevel == "" {
		return res(CheckIsolationLevel, Warn, "kafka.isolation_level is not stated: opctl reads as Kafka's default, read_uncommitted, and sees records of aborted transactions",
			"state what the consumers read: kafka.isolation_level: read_committed|read_uncommitted")
	}
	return res(CheckIsolationLevel, Pass, "kafka.isolation_level: "+j.cfg.Kafka.IsolationLevel+" (stated)", "")
}

func (j judge) timeZone() Result {
	if r, ok := j.noMySQL(CheckTimeZone); ok {
		return r
	}
	srv := j.f.Server
	if srv.Err != "" {
		return res(CheckTimeZone, Warn, "the server's time zone could not be read: "+srv.Err, "")
	}
	server := srv.TimeZone
	if server == "SYSTEM" && srv.SystemTimeZone != "" {
		server = "SYSTEM (" + srv.SystemTimeZone + ")"
	}
	tz := j.cfg.MySQL.TimeZone
	switch {
	case tz == "":
		return res(CheckTimeZone, Warn, "mysql.time_zone is not stated: opctl compares leases and ages in the server's global time zone, "+server,
			"state the session time zone the consumers write DATETIMEs in: mysql.time_zone: \"+00:00\" (or a named zone)")
	case !sameZone(tz, srv.TimeZone, srv.SystemTimeZone):
		return res(CheckTimeZone, Warn, fmt.Sprintf("mysql.time_zone %s differs from the server's global time zone %s: right only if every consumer sets %s on its sessions", tz, server, tz),
			"make sure the consumers' connections set time_zone = '"+tz+"' (their DSN's time_zone/loc), or fix mysql.time_zone")
	}
	return res(CheckTimeZone, Pass, fmt.Sprintf("mysql.time_zone %s = the server's %s", tz, server), "")
}

func sameZone(tz, global, system string) bool {
	norm := func(s string) string {
		s = strings.ToUpper(strings.TrimSpace(s))
		switch s {
		case "UTC", "+00:00", "GMT", "Z", "-00:00", "ETC/UTC":
			return "+00:00"
		}
		return s
	}
	g := global
	if strings.EqualFold(g, "SYSTEM") {
		g = system
	}
	return norm(tz) == norm(g)
}

// binlog: for a pipeline with binlog evidence, log_bin, ROW, FULL and the
// retained binlogs, and a warning for a binlog step without
// binlog.transaction; skip for the others.
func (j judge) binlog() Result {
	if !j.p.UsesBinlog() {
		return res(CheckBinlog, Skip, "no step has binlog evidence", "")
	}
	r := judgeBinlog(j.f.Server, j.p.Retention)
	var untied []string
	for _, s := range j.p.Steps {
		if s.Binlog != nil && s.Binlog.Transaction == "" {
			untied = append(untied, s.Name)
		}
	}
	if len(untied) == 0 || r.Status == Fail {
		return r
	}
	w := fmt.Sprintf("step %s has no binlog.transaction: nothing ties a change to its operation, so another operation that changes the same row by the same amount in its window (a merchant account, a fixed fee) is told apart only by searching the topic for its message, and when that search cannot complete the count is ambiguous (docs/where.md#binlog-evidence)",
		strings.Join(untied, ", "))
	fix := "write a row that names the operation (the ledger row) in the same transaction as the change, and set binlog.transaction to that table.column"
	if r.Status == Warn {
		w, fix = r.Detail+"; "+w, r.Fix+"; "+fix
	} else {
		w = r.Detail + "; " + w
	}
	return res(CheckBinlog, Warn, w, fix)
}

// judgeBinlog is the binlog check on the server's facts: log_bin on,
// binlog_format ROW, binlog_row_image FULL, and binlogs retained for the
// pipeline's retention.
func judgeBinlog(srv sources.ServerFacts, retention string) Result {
	var bad []string
	if !srv.LogBin {
		bad = append(bad, "log_bin is OFF")
	}
	if !strings.EqualFold(srv.BinlogFormat, "ROW") {
		bad = append(bad, fmt.Sprintf("binlog_format is %s, want ROW", orUnknown(srv.BinlogFormat)))
	}
	if !strings.EqualFold(srv.BinlogRowImage, "FULL") {
		bad = append(bad, fmt.Sprintf("binlog_row_image is %s, want FULL", orUnknown(srv.BinlogRowImage)))
	}
	if len(bad) > 0 {
		return res(CheckBinlog, Fail, strings.Join(bad, "; ")+": the binlog cannot show a row's before and after image",
			"set log_bin, binlog_format=ROW and binlog_row_image=FULL on the server (my.cnf), then restart it")
	}
	if srv.BinlogErr != "" {
		return res(CheckBinlog, Warn, "SHOW BINARY LOGS: "+srv.BinlogErr, "grant REPLICATION CLIENT (or BINLOG MONITOR on MariaDB) to the read user")
	}
	if len(srv.BinaryLogs) == 0 {
		return res(CheckBinlog, Warn, "the server lists no binary log", "")
	}
	detail := fmt.Sprintf("log_bin ON, ROW, FULL; %d binary log(s) retained, oldest %s", len(srv.BinaryLogs), srv.BinaryLogs[0])
	if keep, err := config.ParseDuration(retention); err == nil && !srv.OldestBinlog.IsZero() {
		age := time.Since(srv.OldestBinlog)
		if age < keep {
			return res(CheckBinlog, Warn, fmt.Sprintf("%s, from %s: %s of binlog for a retention of %s", detail, srv.OldestBinlog.UTC().Format(time.RFC3339), days(age.Truncate(time.Hour)), retention),
				"keep binlogs at least as long as the pipeline's retention (binlog_expire_logs_seconds / expire_logs_days)")
		}
	}
	return res(CheckBinlog, Pass, detail, "")
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// grants: the read DSN can SELECT and has no write grant; the write DSN
// has what apply needs.
func (j judge) grants() Result {
	if r, ok := j.noMySQL(CheckGrants); ok {
		return r
	}
	rg := j.f.ReadGrants
	if rg.Err != "" {
		return res(CheckGrants, Warn, "SHOW GRANTS for the read user: "+rg.Err, "")
	}
	db := j.f.Database
	read := parseGrants(rg.Lines)
	var problems []string
	status := Pass
	worse := func(s string) {
		if s == Fail || (s == Warn && status == Pass) {
			status = s
		}
	}
	var noSelect []string
	for _, t := range j.tablesRead() {
		d, name := splitTable(db, t)
		if !privileges(read, d, name)["SELECT"] {
			noSelect = append(noSelect, t)
		}
	}
	fix := []string{}
	if len(noSelect) > 0 {
		worse(Fail)
		problems = append(problems, fmt.Sprintf("the read user %s cannot SELECT %s", rg.User, strings.Join(noSelect, ", ")))
		fix = append(fix, fmt.Sprintf("GRANT SELECT ON %s.* TO %s", quoteDB(db), rg.User))
	}
	if w := anyWrite(read); len(w) > 0 {
		worse(Warn)
		problems = append(problems, fmt.Sprintf("the read user %s has write grants (%s): opctl writes only through mysql.write_dsn", rg.User, strings.Join(w, ", ")))
		fix = append(fix, "give mysql.dsn a user with SELECT only (where, reconcile and doctor never write)")
	}
	if wg := j.f.WriteGrants; wg != nil {
		if wg.Err != "" {
			worse(Warn)
			problems = append(problems, "SHOW GRANTS for the write user: "+wg.Err)
		} else {
			wgs := parseGrants(wg.Lines)
			have := privileges(wgs, db, "")
			var lack []string
			for _, p := range j.writeNeeds() {
				if !have[p] {
					lack = append(lack, p)
				}
			}
			if len(lack) > 0 {
				worse(Fail)
				problems = append(problems, fmt.Sprintf("the write user %s lacks %s on %s: repair apply would fail", wg.User, strings.Join(lack, ", "), db))
				fix = append(fix, fmt.Sprintf("GRANT %s ON %s.* TO %s", strings.Join(j.writeNeeds(), ", "), quoteDB(db), wg.User))
			}
			var extra []string
			for _, p := range []string{"DROP", "ALTER", "SUPER", "FILE", "SHUTDOWN", "ALL PRIVILEGES", "ALL"} {
				for _, g := range wgs {
					if slices.Contains(g.privs, p) {
						extra = append(extra, p+" ON "+g.on)
					}
				}
			}
			if len(extra) > 0 {
				worse(Warn)
				problems = append(problems, fmt.Sprintf("the write user %s has more than apply needs (%s)", wg.User, strings.Join(extra, ", ")))
				fix = append(fix, "apply needs "+strings.Join(j.writeNeeds(), ", ")+" (opctl schema apply also CREATE, INDEX: grant them for that run)")
			}
		}
	}
	if p, f := j.writeReadOnly(); p != "" {
		if j.f.WriteGrants != nil {
			worse(Fail)
		} else {
			worse(Warn) // no write_dsn: perhaps nobody applies from this config
		}
		problems = append(problems, p)
		fix = append(fix, f)
	}
	if j.p.UsesBinlog() {
		bg := j.f.BinlogGrants
		if bg == nil {
			bg = &j.f.ReadGrants // the binlog is read through the read DSN
		}
		if lack := replicationLacks(parseGrants(bg.Lines)); bg.Err == "" && len(lack) > 0 {
			worse(Fail)
			problems = append(problems, fmt.Sprintf("the binlog user %s lacks %s: the binlog cannot be read as a replica", bg.User, strings.Join(lack, ", ")))
			fix = append(fix, fmt.Sprintf("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO %s", bg.User))
		}
	}
	if status == Pass {
		detail := fmt.Sprintf("the read user %s can SELECT every configured table and has no write grant", rg.User)
		if j.f.WriteGrants != nil {
			detail += fmt.Sprintf("; the write user %s has %s", j.f.WriteGrants.User, strings.Join(j.writeNeeds(), ", "))
		}
		return res(CheckGrants, Pass, detail, "")
	}
	return res(CheckGrants, status, strings.Join(problems, "; "), strings.Join(fix, "; "))
}

// writeReadOnly says (problem, fix) when the server repair apply writes to
// refuses writes: mysql.write_dsn, else mysql.dsn, on a server whose
// read_only, super_read_only or innodb_read_only is ON (a replica). apply
// would fail on its first statement, unable even to record why.
func (j judge) writeReadOnly() (string, string) {
	g, dsn := j.f.WriteGrants, "mysql.write_dsn"
	if g == nil {
		g, dsn = &j.f.ReadGrants, "mysql.dsn (no mysql.write_dsn is set: repair apply writes there)"
	}
	if len(g.ReadOnly) == 0 {
		return "", ""
	}
	on := make([]string, len(g.ReadOnly))
	for i, v := range g.ReadOnly {
		on[i] = "@@" + v + "=ON"
	}
	return fmt.Sprintf("the server of %s is read-only (%s): repair apply would fail on its first write and could not record the attempt", dsn, strings.Join(on, ", ")),
		"point mysql.write_dsn at the primary (a read-only server is a replica)"
}

// tablesRead are the tables the pipeline names (the snippets' tables are
// checked by preparing them: see tables).
func (j judge) tablesRead() []string {
	var out []string
	add := func(t string) {
		if t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if j.p.State != nil {
		add(j.p.State.Table)
	}
	if j.p.Idempotency != nil {
		add(j.p.Idempotency.Table)
	}
	for _, s := range j.p.Steps {
		if s.Scan != nil {
			add(s.Scan.Table)
		}
	}
	if j.p.Entity != nil {
		add(j.p.Entity.Table)
	}
	add(j.cfg.Audit.AuditTable())
	sort.Strings(out)
	return out
}

// writeNeeds are the privileges repair apply needs on the database: it
// reads under FOR UPDATE (SELECT, and UPDATE for the lock), inserts audit
// rows and deletes one it supersedes, updates state and idempotency rows,
// and runs the steps' reverse statements (README "On your own database").
func (j judge) writeNeeds() []string { return []string{"SELECT", "INSERT", "UPDATE", "DELETE"} }

func splitTable(db, t string) (string, string) {
	if s, name, ok := strings.Cut(t, "."); ok {
		return s, name
	}
	return db, t
}

// quoteDB backquotes the database name the server gave (it need not be an
// identifier the config would accept).
func quoteDB(db string) string {
	if config.ValidIdent(db) {
		return config.QuoteIdent(db)
	}
	return "`" + strings.ReplaceAll(db, "`", "``") + "`"
}
