package config

import (
	"fmt"
	"slices"
	"strings"
)

// partitioners: how the producer chose the message's partition.
const (
	// PartitionerMurmur2 is the Java client's default; it is also opctl's
	// default when partitioner is empty.
	PartitionerMurmur2 = "murmur2"
	// PartitionerFNV1a is sarama's default hash partitioner.
	PartitionerFNV1a = "fnv1a"
	// PartitionerCRC32 is librdkafka's "consistent" partitioner.
	PartitionerCRC32 = "crc32"
	// PartitionerStored reads the partition (and offset) from the state row
	// (state.partition, state.offset) instead of computing it.
	PartitionerStored = "stored"
)

// partitioners lists the valid partitioner values.
var partitioners = []string{PartitionerMurmur2, PartitionerFNV1a, PartitionerCRC32, PartitionerStored}

// Offset reset policies (the consumer's auto.offset.reset).
const (
	OffsetResetLatest   = "latest"
	OffsetResetEarliest = "earliest"
)

// DefaultMessageKey is the message_key used when none is configured.
const DefaultMessageKey = "{biz_id}"

// messageKeyPlaceholders are the placeholders a message_key may use.
var messageKeyPlaceholders = []string{"biz_id", "msg_id"}

// saslMechanisms are the values accepted in kafka.sasl.mechanism.
var saslMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// defaultProbeApplied and defaultProbeAbsent are used for a step with a
// probe and no probe_applied / probe_absent. They are copied, never shared.
var (
	defaultProbeApplied = []string{"APPLIED", "SUCCESS"}
	defaultProbeAbsent  = []string{"NOT_FOUND"}
)

var stepKinds = []string{KindLocal, KindRemote, KindOutbox}

// Errorf returns an *Error located at the YAML node of path ("mysql.dsn",
// "pipelines[0].steps[1].evidence", ...), or at its nearest ancestor present
// in the file, so that code outside this package can report a problem with
// a configured value as "config FILE:LINE: ...". For a Config built in code
// the error has no line.
func (c *Config) Errorf(path, format string, args ...any) *Error {
	e := &Error{File: c.Path, Msg: fmt.Sprintf(format, args...)}
	if c.meta != nil {
		e.File = c.meta.file
		e.Line = c.meta.line(path)
	}
	return e
}

// Validate checks the whole configuration except kafka.brokers, the MySQL
// DSNs and SASL credentials (see ValidateKafka and ValidateMySQL) and, when
// it is valid, fills in defaults so later code can rely on them:
//
//   - pipeline partitioner: "murmur2" when empty (and only when empty);
//   - pipeline offset_reset: "latest" when empty;
//   - pipeline message_key: "{biz_id}" when empty;
//   - step probe_applied: [APPLIED, SUCCESS] and probe_absent: [NOT_FOUND]
//     when the step has a probe and the list is empty.
//
// redrive_topic, mysql.write_dsn and audit.table are left as written; use
// EffectiveRedriveTopic, EffectiveWriteDSN and AuditTable.
//
// Parse and Load call Validate; call it yourself on a Config built in code.
// The error is an ErrorList with every problem, sorted by line.
func (c *Config) Validate() error {
	v := &validator{c: c}
	v.mysql()
	v.kafka()
	v.audit()
	v.pipelines()
	if err := v.errs.asError(); err != nil {
		return err
	}
	c.applyDefaults()
	return nil
}

func (c *Config) applyDefaults() {
	for i := range c.Pipelines {
		p := &c.Pipelines[i]
		if p.Partitioner == "" {
			p.Partitioner = PartitionerMurmur2
		}
		if p.OffsetReset == "" {
			p.OffsetReset = OffsetResetLatest
		}
		if p.MessageKey == "" {
			p.MessageKey = DefaultMessageKey
		}
		for j := range p.Steps {
			s := &p.Steps[j]
			if s.Probe == "" {
				continue
			}
			if len(s.ProbeApplied) == 0 {
				s.ProbeApplied = slices.Clone(defaultProbeApplied)
			}
			if len(s.ProbeAbsent) == 0 {
				s.ProbeAbsent = slices.Clone(defaultProbeAbsent)
			}
		}
	}
}

type validator struct {
	c    *Config
	errs ErrorList
}

func (v *validator) at(path, format string, args ...any) {
	v.errs = append(v.errs, v.c.Errorf(path, format, args...))
}

// line is the line of path, for "first at line N" notes.
func (v *validator) line(path string) int { return v.c.meta.line(path) }

// ident checks an identifier. label prefixes the message, field names the
// key relative to label. A column must not be qualified.
func (v *validator) ident(path, label, field, val string, required, column bool) {
	if val == "" {
		if required {
			v.at(path, "%s%s is required%s", label, field, v.c.unsetHint(path))
		}
		return
	}
	if !ValidIdent(val) {
		v.at(path, "%s%s %q is not a valid identifier (letters, digits, _ and $, not starting with a digit, at most 64 characters; a table may be schema.table)",
			label, field, val)
		return
	}
	if column && strings.Contains(val, ".") {
		v.at(path, "%s%s %q must be a plain column name, without a table or schema prefix", label, field, val)
	}
}

// required reports an empty required value.
func (v *validator) required(path, label, field, val string) bool {
	if val == "" {
		v.at(path, "%s%s is required%s", label, field, v.c.unsetHint(path))
		return false
	}
	return true
}

// query checks a SELECT-with-one-? query and reports whether it passed.
func (v *validator) query(path, label, field, q string) bool {
	if p := checkQuery(q); p != "" {
		v.at(path, "%s%s %s", label, field, p)
		return false
	}
	return true
}

func (v *validator) kafka() {
	k := v.c.Kafka
	if k.Version != "" && !validVersion(k.Version) {
		v.at("kafka.version", "kafka.version %q is not a Kafka version: want a.b.c or a.b.c.d, e.g. \"3.5.0\"", k.Version)
	}
	if s := k.SASL; s != nil {
		switch {
		case s.Mechanism == "":
			v.at("kafka.sasl.mechanism", "kafka.sasl.mechanism is required: one of %s%s", strings.Join(saslMechanisms, ", "), v.c.unsetHint("kafka.sasl.mechanism"))
		case !slices.Contains(saslMechanisms, s.Mechanism):
			v.at("kafka.sasl.mechanism", "kafka.sasl.mechanism %q is not one of %s%s",
				s.Mechanism, strings.Join(saslMechanisms, ", "), didYouMean(s.Mechanism, saslMechanisms))
		}
	}
	if t := k.TLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		v.at("kafka.tls", "kafka.tls: cert_file and key_file go together: set both for a client certificate, or neither")
	}
	if l, levels := k.IsolationLevel, []string{ReadCommitted, ReadUncommitted}; l != "" && !slices.Contains(levels, l) {
		v.at("kafka.isolation_level", "kafka.isolation_level %q is not read_committed or read_uncommitted (set it to the consumers' isolation.level)%s", l, didYouMean(l, levels))
	}
}

func (v *validator) audit() {
	t := v.c.Audit.Table
	v.ident("audit.table", "", "audit.table", t, false, false)
	if t != "" && ValidIdent(t) && !ValidIdent(v.c.Audit.AttemptTable()) {
		v.at("audit.table", "audit.table %q is too long: the attempt table %q would exceed 64 characters", t, v.c.Audit.AttemptTable())
	}
}

func (v *validator) pipelines() {
	c := v.c
	if len(c.Pipelines) == 0 {
		v.at("pipelines", "no pipelines: describe at least one consumer under pipelines:")
	}
	first := map[string]string{} // name → path of its first use
	for i := range c.Pipelines {
		p := &c.Pipelines[i]
		pp := indexPath("pipelines", i)
		if p.Name != "" {
			if prev, ok := first[p.Name]; ok {
				v.at(pp+".name", "pipeline name %q is used twice (first at line %d)", p.Name, v.line(prev))
			} else {
				first[p.Name] = pp + ".name"
			}
		}
		v.pipeline(p, pp)
	}
}

func (v *validator) pipeline(p *Pipeline, pp string) {
	label := pp + ": "
	if p.Name != "" {
		label = fmt.Sprintf("pipeline %q: ", p.Name)
	}
	switch {
	case p.Name == "":
		v.at(pp+".name", "%sname is required%s", label, v.c.unsetHint(pp+".name"))
	case !validName(p.Name):
		v.at(pp+".name", "pipeline name %q may only contain letters, digits, '_', '.' and '-'", p.Name)
	}
	if v.required(pp+".topic", label, "topic", p.Topic) && !validTopic(p.Topic) {
		v.at(pp+".topic", "%stopic %q is not a valid Kafka topic name (letters, digits, '.', '_' and '-', at most 249)", label, p.Topic)
	}
	if p.RedriveTopic != "" && !validTopic(p.RedriveTopic) {
		v.at(pp+".redrive_topic", "%sredrive_topic %q is not a valid Kafka topic name (letters, digits, '.', '_' and '-', at most 249)", label, p.RedriveTopic)
	}
	v.required(pp+".group", label, "group", p.Group)

	// partitioner: empty means murmur2 (the default is filled in only after
	// validation, and only when the key was empty or absent).
	switch {
	case p.Partitioner == "":
	case !slices.Contains(partitioners, p.Partitioner):
		v.at(pp+".partitioner", "%spartitioner %q is not one of %s%s", label, p.Partitioner, strings.Join(partitioners, ", "), didYouMean(p.Partitioner, partitioners))
	case p.Partitioner == PartitionerStored && (p.State == nil || p.State.Partition == "" || p.State.Offset == ""):
		v.at(pp+".partitioner", "%spartitioner \"stored\" needs state.partition and state.offset: the state columns holding the message's source partition and offset", label)
	}
	resets := []string{OffsetResetLatest, OffsetResetEarliest}
	if p.OffsetReset != "" && !slices.Contains(resets, p.OffsetReset) {
		v.at(pp+".offset_reset", "%soffset_reset %q is not latest or earliest%s", label, p.OffsetReset, didYouMean(p.OffsetReset, resets))
	}
	if p.MessageKey != "" {
		if _, problem := checkTemplate(p.MessageKey, messageKeyPlaceholders); problem != "" {
			v.at(pp+".message_key", "%smessage_key %q %s", label, p.MessageKey, problem)
		}
	}
	if len(p.Steps) == 0 {
		v.at(pp+".steps", "%sno steps: a pipeline needs at least one step", label)
	}
	commits := []string{CommitAfterSteps, CommitBeforeSteps, CommitAuto}
	if p.Commit != "" && !slices.Contains(commits, p.Commit) {
		v.at(pp+".commit", "%scommit %q is not one of %s: when does the consumer commit a message's offset?%s", label, p.Commit, strings.Join(commits, ", "), didYouMean(p.Commit, commits))
	}
	if p.State == nil && p.Idempotency == nil && !p.leavesEvidence() {
		v.at(pp, "%sneeds a state block, an idempotency block, or a step whose effects opctl can read (evidence, binlog, intent or probe): without one nothing shows how far an operation got", label)
	}
	if p.MySQL != nil && p.MySQL.TimeZone != "" {
		if _, problem := ParseTimeZone(p.MySQL.TimeZone); problem != "" {
			v.at(pp+".mysql.time_zone", "%smysql.time_zone %q %s", label, p.MySQL.TimeZone, problem)
		}
	}
	if p.State != nil {
		v.state(p.State, pp+".state", label)
	}
	v.steps(p, pp, label)
	if p.Idempotency != nil {
		v.idempotency(p, p.Idempotency, pp+".idempotency", label)
	}
	if p.Entity != nil {
		v.entity(p, pp+".entity", label)
	}
}

func (v *validator) state(s *State, sp, label string) {
	v.ident(sp+".table", label, "state.table", s.Table, true, false)
	cols := []struct {
		key, val string
		required bool
	}{
		{"key", s.Key, true}, {"status", s.Status, true}, {"version", s.Version, false},
		{"owner", s.Owner, false}, {"lease_until", s.LeaseUntil, false},
		{"partition", s.Partition, false}, {"offset", s.Offset, false},
		{"msg_id", s.MsgID, false}, {"created_at", s.CreatedAt, false},
		{"updated_at", s.UpdatedAt, false},
	}
	for _, col := range cols {
		v.ident(sp+"."+col.key, label, "state."+col.key, col.val, col.required, true)
	}
	if len(s.Terminal) == 0 {
		v.at(sp+".terminal", "%sstate.terminal is empty: list the status value(s) that mean the operation finished, e.g. terminal: [DONE]", label)
	}
	inList := map[string]string{} // status → list it first appeared in
	for _, l := range []struct {
		name string
		vals []string
	}{{"initial", s.Initial}, {"terminal", s.Terminal}, {"failed", s.Failed}} {
		for j, st := range l.vals {
			path := indexPath(sp+"."+l.name, j)
			if st == "" {
				v.at(path, "%sstate.%s[%d] is empty%s", label, l.name, j, v.c.unsetHint(path))
				continue
			}
			prev, ok := inList[st]
			switch {
			case !ok:
				inList[st] = l.name
			case prev != l.name:
				v.at(path, "%sstatus %q is in both state.%s and state.%s: a status belongs to one of initial, terminal, failed", label, st, prev, l.name)
			}
		}
	}
}

func (v *validator) steps(p *Pipeline, pp, label string) {
	firstName := map[string]string{} // step name → path
	firstDone := map[string]string{} // done_status → step name
	for j := range p.Steps {
		s := &p.Steps[j]
		sp := indexPath(pp+".steps", j)
		sl := fmt.Sprintf("%ssteps[%d]: ", label, j)
		if s.Name != "" {
			sl = fmt.Sprintf("%sstep %q: ", label, s.Name)
		}
		switch {
		case s.Name == "":
			v.at(sp+".name", "%sname is required%s", sl, v.c.unsetHint(sp+".name"))
		case !validName(s.Name):
			v.at(sp+".name", "%sstep name %q may only contain letters, digits, '_', '.' and '-'", label, s.Name)
		default:
			if prev, ok := firstName[s.Name]; ok {
				v.at(sp+".name", "%sstep name %q is used twice (first at line %d)", label, s.Name, v.line(prev))
			} else {
				firstName[s.Name] = sp + ".name"
			}
		}

		switch s.Kind {
		case "":
			v.at(sp+".kind", "%skind is required: one of local, remote, outbox", sl)
		case KindLocal, KindOutbox:
			if s.Evidence == "" && s.Binlog == nil {
				article := "a"
				if s.Kind == KindOutbox {
					article = "an"
				}
				v.at(sp, "%s%s %s step needs evidence: a SELECT with one ? (the biz_id) whose rows prove the step happened%s",
					sl, article, s.Kind, v.c.unsetHint(sp+".evidence"))
			}
			for _, f := range []struct{ key, val string }{{"intent", s.Intent}, {"probe", s.Probe}, {"compensate", s.Compensate}, {"redrive", s.Redrive}} {
				if f.val != "" {
					v.at(sp+"."+f.key, "%s%s is only for remote steps (this step is %s)", sl, f.key, s.Kind)
				}
			}
		case KindRemote:
			// Neither intent nor probe: the step is unverified
			// (docs/verdicts.md#unverified-steps), which doctor points out.
		default:
			v.at(sp+".kind", "%skind %q is not one of local, remote, outbox%s", sl, s.Kind, didYouMean(s.Kind, stepKinds))
		}

		evidenceOK := false
		if s.Evidence != "" {
			evidenceOK = v.query(sp+".evidence", sl, "evidence", s.Evidence)
		}
		if s.Intent != "" {
			v.query(sp+".intent", sl, "intent", s.Intent)
		}
		if len(s.Reverse) > 0 && (s.Kind == KindRemote || s.Kind == KindOutbox) {
			v.at(sp+".reverse", "%sreverse is only allowed on local steps (this step is %s)", sl, s.Kind)
		}
		v.reverse(s, sp, sl, evidenceOK)
		if s.Binlog != nil {
			v.binlog(s, sp, sl)
		}
		v.probe(s, sp, sl)
		if s.Scan != nil {
			v.ident(sp+".scan.table", sl, "scan.table", s.Scan.Table, true, false)
			v.ident(sp+".scan.key", sl, "scan.key", s.Scan.Key, true, true)
			v.ident(sp+".scan.time", sl, "scan.time", s.Scan.Time, false, true)
		}

		if st := p.State; st != nil {
			// done_status is optional: a state block on the business table
			// itself (seed 001's order row, PROCESSING → DONE) records no
			// status for the steps in between (docs/config.md#steps).
			path := sp + ".done_status"
			switch {
			case s.DoneStatus == "":
			case firstDone[s.DoneStatus] != "":
				v.at(path, "%sdone_status %q repeats: step %q already uses it, so the state row could not tell the two steps apart",
					sl, s.DoneStatus, firstDone[s.DoneStatus])
			case slices.Contains(st.Initial, s.DoneStatus):
				v.at(path, "%sdone_status %q is an initial status (state.initial); a step's done_status must record progress", sl, s.DoneStatus)
			case slices.Contains(st.Failed, s.DoneStatus):
				v.at(path, "%sdone_status %q is a failed status (state.failed); a step's done_status must record progress", sl, s.DoneStatus)
			case slices.Contains(st.Terminal, s.DoneStatus) && j != len(p.Steps)-1:
				v.at(path, "%sdone_status %q is a terminal status (state.terminal), but only the last step (%q) may finish the operation",
					sl, s.DoneStatus, p.Steps[len(p.Steps)-1].Name)
			}
			if s.DoneStatus != "" && firstDone[s.DoneStatus] == "" {
				name := s.Name
				if name == "" {
					name = fmt.Sprintf("steps[%d]", j)
				}
				firstDone[s.DoneStatus] = name
			}
		}
	}
}

// reverse checks each reverse statement of a step: one INSERT, UPDATE or
// DELETE binding only :biz_id and columns its evidence returns, when the
// evidence (valid: evidenceOK) names them (docs/config.md "Identifiers and
// SQL snippets"); with a * or an unnamed expression the plan checks the
// names against the row it reads.
func (v *validator) reverse(s *Step, sp, sl string, evidenceOK bool) {
	var cols []string
	known := false
	switch {
	case s.Binlog != nil:
		// A binlog change binds :key and :delta (docs/config.md#binlog).
		cols, known = slices.Clone(binlogReverseParams), true
	case evidenceOK:
		cols, known = selectColumns(s.Evidence)
	}
	for k, r := range s.Reverse {
		path := indexPath(sp+".reverse", k)
		if strings.TrimSpace(r) == "" {
			v.at(path, "%sreverse[%d] is empty%s", sl, k, v.c.unsetHint(path))
			continue
		}
		names, problem := checkReverse(r)
		if problem != "" {
			v.at(path, "%sreverse[%d] %s", sl, k, problem)
			continue
		}
		if !known {
			continue
		}
		var unknown, seen []string
		for _, n := range names {
			if n == "biz_id" || slices.Contains(cols, n) || slices.Contains(seen, n) {
				continue
			}
			seen = append(seen, n)
			hint := ""
			if m := suggest(n, append([]string{"biz_id"}, cols...)); m != "" {
				hint = " (did you mean :" + m + "?)"
			}
			unknown = append(unknown, ":"+n+hint)
		}
		if len(unknown) > 0 {
			v.at(path, "%sreverse[%d] binds %s, which the evidence does not return: a reverse statement binds :biz_id and the columns of its evidence row (%s)",
				sl, k, strings.Join(unknown, ", "), strings.Join(cols, ", "))
		}
	}
}

func (v *validator) probe(s *Step, sp, sl string) {
	if s.Probe == "" {
		for _, f := range []struct {
			key  string
			vals []string
		}{{"probe_applied", s.ProbeApplied}, {"probe_absent", s.ProbeAbsent}} {
			if len(f.vals) > 0 {
				v.at(sp+"."+f.key, "%s%s has no effect without probe%s", sl, f.key, v.c.unsetHint(sp+".probe"))
			}
		}
	} else {
		names, problem := checkURLTemplate(s.Probe)
		switch {
		case problem != "":
			v.at(sp+".probe", "%sprobe %s", sl, problem)
		case !slices.Contains(names, "request_id") && !slices.Contains(names, "biz_id"):
			v.at(sp+".probe", "%sprobe must contain {request_id} or {biz_id}, or every operation would probe the same URL", sl)
		case slices.Contains(names, "request_id") && s.Intent == "":
			v.at(sp+".probe", "%sprobe uses {request_id} but the step has no intent query to read the request id from", sl)
		}
		applied, absent := s.ProbeApplied, s.ProbeAbsent
		if len(applied) == 0 {
			applied = defaultProbeApplied
		}
		if len(absent) == 0 {
			absent = defaultProbeAbsent
		}
		for k, a := range s.ProbeAbsent {
			if a == "" {
				v.at(indexPath(sp+".probe_absent", k), "%sprobe_absent[%d] is empty", sl, k)
			}
		}
		for k, a := range s.ProbeApplied {
			if a == "" {
				v.at(indexPath(sp+".probe_applied", k), "%sprobe_applied[%d] is empty", sl, k)
			}
		}
		for k, a := range absent {
			if a != "" && slices.Contains(applied, a) {
				path := sp + ".probe_absent"
				if len(s.ProbeAbsent) > 0 {
					path = indexPath(path, k)
				}
				v.at(path, "%sprobe status %q is in both probe_applied and probe_absent", sl, a)
			}
		}
	}
	for _, f := range []struct{ key, val string }{{"compensate", s.Compensate}, {"redrive", s.Redrive}} {
		if f.val == "" {
			continue
		}
		names, problem := checkURLTemplate(f.val)
		switch {
		case problem != "":
			v.at(sp+"."+f.key, "%s%s %s", sl, f.key, problem)
		case f.key == "redrive" && !slices.Contains(names, "request_id") && !slices.Contains(names, "biz_id"):
			v.at(sp+".redrive", "%sredrive must contain {biz_id} or {request_id}: it makes one operation's effect", sl)
		case f.key == "redrive" && slices.Contains(names, "request_id") && s.Intent == "":
			v.at(sp+".redrive", "%sredrive uses {request_id} but the step has no intent query to read the request id from", sl)
		}
	}
	if s.HonoursIdempotencyKey && s.Kind != KindRemote {
		v.at(sp+".honours_idempotency_key", "%shonours_idempotency_key is only for remote steps (this step is %s)", sl, s.Kind)
	}
}

func (v *validator) idempotency(p *Pipeline, id *Idempotency, ip, label string) {
	v.ident(ip+".table", label, "idempotency.table", id.Table, true, false)
	v.ident(ip+".key", label, "idempotency.key", id.Key, true, true)
	v.ident(ip+".biz_id", label, "idempotency.biz_id", id.BizID, false, true)
	v.ident(ip+".action", label, "idempotency.action", id.Action, true, true)
	v.ident(ip+".created_at", label, "idempotency.created_at", id.CreatedAt, false, true)
	if id.MsgIDPath != "" {
		if _, problem := ParseMessagePath(id.MsgIDPath, false); problem != "" {
			v.at(ip+".msg_id_path", "%sidempotency.msg_id_path %q %s", label, id.MsgIDPath, problem)
		}
	}
	reopens := []string{ReopenPending, ReopenDelete}
	if id.Reopen != "" && !slices.Contains(reopens, id.Reopen) {
		v.at(ip+".reopen", "%sidempotency.reopen %q is not pending or delete%s", label, id.Reopen, didYouMean(id.Reopen, reopens))
	}
	if id.BizID == "" && p.MessageKey != "" && !strings.Contains(p.MessageKey, "{biz_id}") {
		// Without biz_id the records are found through the operation's
		// messages, which are found by their key.
		v.at(ip+".biz_id", "%sidempotency.biz_id is not set, so the records are found through the operation's messages, but message_key %q does not hold {biz_id}: set idempotency.biz_id, or a message_key with {biz_id}", label, p.MessageKey)
	}
}

func (v *validator) entity(p *Pipeline, ep, label string) {
	e := p.Entity
	if v.required(ep+".query", label, "entity.query", e.Query) {
		v.query(ep+".query", label, "entity.query", e.Query)
	}
	if e.Table != "" || e.Key != "" || e.Status != "" {
		// The batch lookup: table, key and status go together.
		for _, f := range []struct{ key, val string }{{"table", e.Table}, {"key", e.Key}, {"status", e.Status}} {
			if f.val == "" {
				v.at(ep+"."+f.key, "%sentity.%s is required when entity.table, entity.key or entity.status is set (the batch lookup needs all three: the entity table, its biz_id column and its status column)%s",
					label, f.key, v.c.unsetHint(ep+"."+f.key))
			}
		}
		v.ident(ep+".table", label, "entity.table", e.Table, false, false)
		v.ident(ep+".key", label, "entity.key", e.Key, false, true)
		v.ident(ep+".status", label, "entity.status", e.Status, false, true)
	}
	if e.UpdatedAt != "" {
		if e.Table == "" {
			v.at(ep+".updated_at", "%sentity.updated_at needs entity.table, entity.key and entity.status: it is a column of that table (watch polls it by (updated_at, key))", label)
		}
		v.ident(ep+".updated_at", label, "entity.updated_at", e.UpdatedAt, false, true)
	}
	switch {
	case e.EffectStep == "":
		v.at(ep+".effect_step", "%sentity.effect_step is required: the step whose effect a skip may have swallowed%s", label, v.c.unsetHint(ep+".effect_step"))
	case p.StepIndex(e.EffectStep) < 0:
		names := make([]string, len(p.Steps))
		for i, s := range p.Steps {
			names[i] = s.Name
		}
		v.at(ep+".effect_step", "%sentity.effect_step %q is not a step of this pipeline%s (steps: %s)",
			label, e.EffectStep, didYouMean(e.EffectStep, names), strings.Join(names, ", "))
	}
	if len(e.Lifecycle) == 0 {
		v.at(ep+".lifecycle", "%sentity.lifecycle is empty: list the entity's statuses in order, e.g. [CREATED, PAID, SHIPPED]", label)
	}
	if len(e.Cancels) == 0 {
		v.at(ep+".cancels", "%sentity.cancels is empty: list the statuses that cancel the entity, e.g. [REFUNDED, CANCELLED]", label)
	}
	seen := map[string]string{}
	for _, l := range []struct {
		name string
		vals []string
	}{{"lifecycle", e.Lifecycle}, {"cancels", e.Cancels}} {
		for j, st := range l.vals {
			path := indexPath(ep+"."+l.name, j)
			if st == "" {
				v.at(path, "%sentity.%s[%d] is empty%s", label, l.name, j, v.c.unsetHint(path))
				continue
			}
			prev, ok := seen[st]
			switch {
			case !ok:
				seen[st] = l.name
			case prev == l.name:
				v.at(path, "%sstatus %q appears twice in entity.%s", label, st, l.name)
			default:
				v.at(path, "%sstatus %q is in both entity.lifecycle and entity.cancels", label, st)
			}
		}
	}
}

// ValidateKafka checks what is needed to reach the brokers: kafka.brokers
// is not empty and each entry is host:port, and a SASL block has a user and
// a password. Load does not call it, because --brokers may replace
// kafka.brokers: apply flags first, then call ValidateKafka before talking
// to Kafka. A value still as loaded from the file is reported with its line;
// one set in code (e.g. from --brokers) without.
func (c *Config) ValidateKafka() error {
	var errs ErrorList
	m := c.meta
	fromFile := m != nil && slices.Equal(c.Kafka.Brokers, m.brokers)
	if len(c.Kafka.Brokers) == 0 {
		var unset []string
		if m != nil {
			for path, names := range m.unset {
				if strings.HasPrefix(path, "kafka.brokers[") {
					unset = append(unset, names...)
				}
			}
		}
		slices.Sort(unset)
		hint := notSetHint(slices.Compact(unset))
		errs = append(errs, c.Errorf("kafka.brokers", "kafka.brokers is empty%s (list host:port addresses under kafka.brokers, or pass --brokers)", hint))
	}
	for i, b := range c.Kafka.Brokers {
		problem := checkHostPort(b)
		if problem == "" {
			continue
		}
		if fromFile {
			errs = append(errs, c.Errorf(m.brokerSrc[i], "kafka broker %q %s", b, problem))
		} else {
			errs = append(errs, &Error{Msg: fmt.Sprintf("kafka broker %q %s", b, problem)})
		}
	}
	if s := c.Kafka.SASL; s != nil {
		for _, f := range []struct{ key, val string }{{"user", s.User}, {"password", s.Password}} {
			if f.val == "" {
				errs = append(errs, c.Errorf("kafka.sasl."+f.key, "kafka.sasl.%s is empty%s", f.key, c.unsetHint("kafka.sasl."+f.key)))
			}
		}
	}
	return errs.asError()
}

// mysql checks mysql.time_zone; the DSNs wait for ValidateMySQL.
func (v *validator) mysql() {
	if tz := v.c.MySQL.TimeZone; tz != "" {
		if _, problem := ParseTimeZone(tz); problem != "" {
			v.at("mysql.time_zone", "mysql.time_zone %q %s", tz, problem)
		}
	}
}

// ValidateMySQL checks that mysql.dsn is set, that it and mysql.write_dsn
// (when set) are DSNs opctl can use (see CheckDSN: an address in tcp(...)
// with a valid port, a database name, parameters as key=value; and then
// each of drivers, such as the driver package's sources/mysql.CheckDSN,
// which reads the parameters as the driver does), and mysql.time_zone
// (checked at load too). A driver check returns the problem, or "". Load
// does not call it, because --mysql-dsn may supply the DSN: apply flags
// first, then call ValidateMySQL before connecting. An empty DSN names the unset variable,
// e.g. "mysql.dsn is empty: $OPCTL_MYSQL_DSN is not set". DSNs in messages
// are redacted.
func (c *Config) ValidateMySQL(drivers ...func(dsn string) string) error {
	check := func(dsn string) string {
		if p := CheckDSN(dsn); p != "" {
			return p
		}
		for _, d := range drivers {
			if p := d(dsn); p != "" {
				return p
			}
		}
		return ""
	}
	var errs ErrorList
	at := func(path, loaded, val, format string, args ...any) {
		if c.meta != nil && val == loaded {
			errs = append(errs, c.Errorf(path, format, args...))
		} else {
			errs = append(errs, &Error{Msg: fmt.Sprintf(format, args...)})
		}
	}
	var loadedDSN, loadedWrite string
	if c.meta != nil {
		loadedDSN, loadedWrite = c.meta.dsn, c.meta.writeDSN
	}
	if c.MySQL.DSN == "" {
		at("mysql.dsn", loadedDSN, "", "mysql.dsn is empty%s (set it, or pass --mysql-dsn)", c.unsetHint("mysql.dsn"))
	} else if p := check(c.MySQL.DSN); p != "" {
		at("mysql.dsn", loadedDSN, c.MySQL.DSN, "mysql.dsn %q %s", RedactDSN(c.MySQL.DSN), p)
	}
	if c.MySQL.WriteDSN != "" {
		if p := check(c.MySQL.WriteDSN); p != "" {
			at("mysql.write_dsn", loadedWrite, c.MySQL.WriteDSN, "mysql.write_dsn %q %s", RedactDSN(c.MySQL.WriteDSN), p)
		}
	}
	if c.MySQL.BinlogDSN != "" {
		if p := check(c.MySQL.BinlogDSN); p != "" {
			errs = append(errs, c.Errorf("mysql.binlog_dsn", "mysql.binlog_dsn %q %s", RedactDSN(c.MySQL.BinlogDSN), p))
		}
	}
	if tz := c.MySQL.TimeZone; tz != "" {
		if _, p := ParseTimeZone(tz); p != "" {
			errs = append(errs, c.Errorf("mysql.time_zone", "mysql.time_zone %q %s", tz, p))
		}
	}
	for i := range c.Pipelines {
		o := c.Pipelines[i].MySQL
		if o == nil {
			continue
		}
		pp := indexPath("pipelines", i) + ".mysql"
		for _, f := range []struct{ key, val string }{{"dsn", o.DSN}, {"write_dsn", o.WriteDSN}, {"binlog_dsn", o.BinlogDSN}} {
			if f.val == "" {
				continue
			}
			if p := check(f.val); p != "" {
				errs = append(errs, c.Errorf(pp+"."+f.key, "pipeline %q: mysql.%s %q %s", c.Pipelines[i].Name, f.key, RedactDSN(f.val), p))
			}
		}
	}
	return errs.asError()
}
