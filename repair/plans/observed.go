package plans

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Observed is everything a plan was built from (docs/repair.md "What a
// plan records"): the state row, the idempotency records, the entity's
// status, each step's evidence rows (reversed flagged) and intents, the
// verdict, what Kafka said (redelivery, the message's position and the
// record itself, the redrive topic's partition count, whether the lease
// owner is a group member) and which sources answered.
//
// It is two things at once. The planner reads nothing else: Build plans
// from the Observed of its input, so apply can rebuild every action from a
// plan's Observed, its request and the configuration (Rederive) and refuse
// a plan whose actions differ. And it is the fingerprint of the stale
// check: apply observes the operation again and refuses a plan whose
// Observed changed, with the diff. The committed offset itself is left out:
// it moves all the time, and only the redelivery answer matters.
type Observed struct {
	Verdict     inspect.Code             `json:"verdict"`
	Redelivery  inspect.RedeliveryAnswer `json:"redelivery"`
	State       ObservedState            `json:"state"`
	Idempotency []ObservedRecord         `json:"idempotency"`
	Entity      *ObservedEntity          `json:"entity,omitempty"`
	Steps       []ObservedStep           `json:"steps"`
	Kafka       ObservedKafka            `json:"kafka"`
	// Deleted are the idempotency records opctl's applied flip_skipped
	// actions deleted (reopen: delete), whole: what restore_record puts
	// back.
	Deleted []ObservedDeleted `json:"deleted,omitempty"`
	// ActionColumn is the idempotency action column's declared type, when
	// it was read: what flip_skipped may write
	// (docs/repair.md#reopening-a-skipped-record).
	ActionColumn string `json:"action_column,omitempty"`
	// Sources are the statuses of the mysql and kafka reads.
	Sources map[string]string `json:"sources,omitempty"`
}

// ObservedState is the state row as fingerprinted.
type ObservedState struct {
	Found   bool   `json:"found"`
	Status  string `json:"status,omitempty"`
	Version *int64 `json:"version,omitempty"`
	Owner   string `json:"owner,omitempty"`
	// LeaseUntil is the lease's expiry as the database wrote it ("" none).
	LeaseUntil string `json:"lease_until,omitempty"`
	// LeaseActive is true when the lease was live by the database clock.
	LeaseActive bool   `json:"lease_active,omitempty"`
	MsgID       string `json:"msg_id,omitempty"`
	// Reached is how many steps the status claims done (-1: none).
	Reached int `json:"reached"`
	// OwnerMember says whether Owner was a member of the consumer group
	// (nil: no owner, or the group could not be read).
	OwnerMember *bool `json:"owner_member,omitempty"`
}

// ObservedRecord is one idempotency record.
type ObservedRecord struct {
	Key    string `json:"key"`
	Action string `json:"action"`
}

// ObservedDeleted is an idempotency record opctl deleted, as its audit
// image holds it.
type ObservedDeleted struct {
	Key string `json:"key"`
	Row Image  `json:"row"`
}

// ObservedEntity is the entity's status.
type ObservedEntity struct {
	Found  bool   `json:"found"`
	Status string `json:"status"`
}

// ObservedStep is one step's evidence and intents.
type ObservedStep struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	// Count is the step's effect count.
	Count int `json:"count"`
	// Evidence lists each row (identity, live or reversed, its columns), in
	// query order.
	Evidence []ObservedRow `json:"evidence,omitempty"`
	// Intents are the intents' request ids and outcomes (acked, applied,
	// absent, unknown, compensated).
	Intents []ObservedIntent `json:"intents,omitempty"`
	// ProbeCount is a {biz_id} probe's effect count.
	ProbeCount *int `json:"probe_count,omitempty"`
	// Error is why the step could not be read.
	Error string `json:"error,omitempty"`
	// Binlog is how a binlog step's changes were weighed against the other
	// operations that may own them (docs/where.md#binlog-evidence).
	Binlog *ObservedBinlog `json:"binlog,omitempty"`
}

// ObservedBinlog is a binlog step's attribution: the row and delta, the
// operation's count over every assignment, the other operations that may
// own its changes and the changes they may own.
type ObservedBinlog struct {
	Key         string   `json:"key"`
	Delta       string   `json:"delta"`
	CountMin    int      `json:"count_min"`
	CountMax    int      `json:"count_max"`
	Competitors []string `json:"competitors,omitempty"`
	Shared      []string `json:"shared,omitempty"`
}

// ObservedRow is one evidence row.
type ObservedRow struct {
	ID       string `json:"id"`
	Reversed bool   `json:"reversed,omitempty"`
	// Row is the row's columns as text (ValueText).
	Row Image `json:"row,omitempty"`
}

// ObservedIntent is one intent.
type ObservedIntent struct {
	RequestID string `json:"request_id"`
	Acked     bool   `json:"acked"`
	Outcome   string `json:"outcome"`
	SentAt    string `json:"sent_at,omitempty"`
}

// ObservedKafka is what Kafka said of the operation's message.
type ObservedKafka struct {
	// Located is how the message was found (stored, searched, republished,
	// unknown); Partition and Offset where.
	Located   string `json:"located,omitempty"`
	Partition *int32 `json:"partition,omitempty"`
	Offset    *int64 `json:"offset,omitempty"`
	// Detail says why the record could not be read, when it could not.
	Detail string `json:"detail,omitempty"`
	// RedrivePartitions is the redrive topic's partition count (0: not read).
	RedrivePartitions int32 `json:"redrive_partitions,omitempty"`
	// Message is the record as read back, when it could be.
	Message *ObservedMessage `json:"message,omitempty"`
}

// ObservedMessage is the operation's record as read back.
type ObservedMessage struct {
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Key       []byte            `json:"key"`
	Value     []byte            `json:"value"`
	Headers   map[string]string `json:"headers,omitempty"`
}

// Observe computes what a plan records of a report, the evidence it was
// computed from (nil: not known; no message, no group) and the redrive
// topic's partition count (0: not read).
func Observe(r inspect.Report, ev *sources.Evidence, redrivePartitions int32) Observed {
	o := Observed{Verdict: r.Verdict.Code, Redelivery: r.Kafka.Redelivery, Idempotency: []ObservedRecord{}, Steps: []ObservedStep{}}
	if r.State.Found {
		o.State = ObservedState{Found: true, Status: text(r.State.Status), Version: r.State.Version, Owner: text(r.State.Owner),
			LeaseActive: r.State.LeaseActive, MsgID: text(r.State.MsgID), Reached: r.State.Reached}
		if r.State.LeaseUntil != nil {
			o.State.LeaseUntil = wall(*r.State.LeaseUntil)
		}
	} else {
		o.State.Reached = -1
	}
	for _, x := range r.Idempotency {
		o.Idempotency = append(o.Idempotency, ObservedRecord{Key: text(x.Key), Action: text(x.Action)})
	}
	if r.Entity != nil {
		o.Entity = &ObservedEntity{Found: r.Entity.Found, Status: text(r.Entity.Status)}
	}
	for _, s := range r.Steps {
		os := ObservedStep{Name: s.Name, Status: string(s.Status), Count: s.EvidenceCount, Error: text(s.Error)}
		for _, e := range s.Evidence {
			os.Evidence = append(os.Evidence, ObservedRow{ID: text(inspect.IdentityString(e.Identity())), Reversed: e.Reversed, Row: ImageOf(e.Row)})
		}
		for _, in := range s.Intents {
			oi := ObservedIntent{RequestID: text(in.RequestID), Acked: in.AckedAt != nil, Outcome: string(in.Outcome)}
			if in.SentAt != nil {
				oi.SentAt = in.SentAt.UTC().Format(time.RFC3339Nano)
			}
			os.Intents = append(os.Intents, oi)
		}
		if s.Probe != nil && s.Probe.Count != nil {
			n := *s.Probe.Count
			os.ProbeCount = &n
		}
		if b := s.Binlog; b != nil {
			ob := &ObservedBinlog{Key: text(b.Key), Delta: text(b.Delta), CountMin: b.CountMin, CountMax: b.CountMax}
			for _, c := range b.Competitors {
				ob.Competitors = append(ob.Competitors, text(c.BizID))
			}
			for _, sc := range b.Shared {
				ob.Shared = append(ob.Shared, text(sc.ID))
			}
			os.Binlog = ob
		}
		o.Steps = append(o.Steps, os)
	}
	o.Kafka = ObservedKafka{Located: r.Kafka.Located, Partition: r.Kafka.Partition, Offset: r.Kafka.Offset, RedrivePartitions: redrivePartitions}
	srcs := r.Sources
	if ev != nil && ev.Sources != nil {
		srcs = ev.Sources
	}
	for _, k := range []string{"mysql", "kafka"} {
		if v, ok := srcs[k]; ok {
			if o.Sources == nil {
				o.Sources = map[string]string{}
			}
			o.Sources[k] = v
		}
	}
	if ev != nil {
		o.ActionColumn = text(ev.DB.ActionColumn)
		for _, a := range ev.DB.Audit {
			if d := a.Deleted; d != nil && a.Outcome == sources.AuditApplied {
				od := ObservedDeleted{Key: text(d.Key)}
				for i, c := range d.Columns {
					f := Field{Name: text(c)}
					if i < len(d.Values) && d.Values[i] != nil {
						v := text(*d.Values[i])
						f.Value = &v
					}
					od.Row = append(od.Row, f)
				}
				o.Deleted = append(o.Deleted, od)
			}
		}
		if m := ev.Kafka.Message; m != nil {
			om := &ObservedMessage{Partition: m.Partition, Offset: m.Offset, Key: slices.Clone(m.Key), Value: slices.Clone(m.Value)}
			if len(m.Headers) > 0 {
				om.Headers = make(map[string]string, len(m.Headers))
				for k, v := range m.Headers {
					om.Headers[text(k)] = text(v)
				}
			}
			o.Kafka.Message = om
		}
		if r.State.Found && r.State.Owner != "" && ev.Sources["kafka"] == sources.StatusOK {
			b := IsMember(ev.Kafka.Group, r.State.Owner)
			o.State.OwnerMember = &b
		}
	}
	if o.Kafka.Message == nil {
		o.Kafka.Detail = text(r.Kafka.Detail)
	}
	return o
}

// text is s as a plan records it: valid UTF-8, an invalid byte written as
// U+FFFD. JSON cannot carry invalid UTF-8, so a plan read back from its
// file must hold exactly what was recorded (docs/repair.md "The plan
// file": a copied record's header that is not UTF-8 is copied as text).
func text(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// report is the triage a plan is built from: the report the planner reads,
// rebuilt from what the plan records (and nothing else).
func (o Observed) report(bizID, pipeline, summary string) inspect.Report {
	r := inspect.Report{BizID: bizID, Pipeline: pipeline, Verdict: inspect.Verdict{Code: o.Verdict, Summary: summary},
		Steps: []inspect.StepView{}, Sources: maps.Clone(o.Sources)}
	st := o.State
	r.State = inspect.StateView{Found: st.Found, Status: st.Status, Version: st.Version, Owner: st.Owner,
		LeaseActive: st.LeaseActive, MsgID: st.MsgID, Reached: st.Reached}
	for _, x := range o.Idempotency {
		r.Idempotency = append(r.Idempotency, inspect.IdempotencyView{Key: x.Key, Action: x.Action})
	}
	if o.Entity != nil {
		r.Entity = &inspect.EntityView{Found: o.Entity.Found, Status: o.Entity.Status}
	}
	acked := time.Unix(0, 0).UTC()
	for i, s := range o.Steps {
		v := inspect.StepView{Index: i + 1, Name: s.Name, Status: inspect.StepStatus(s.Status), EvidenceCount: s.Count, Error: s.Error, Evidence: []inspect.EvidenceRow{}}
		for _, e := range s.Evidence {
			row := sources.Row{Columns: make([]string, len(e.Row)), Values: make([]sources.Value, len(e.Row))}
			for j, f := range e.Row {
				row.Columns[j] = f.Name
				if f.Value != nil {
					row.Values[j] = *f.Value
				}
			}
			if len(e.Row) == 0 {
				row = sources.Row{Columns: []string{"id"}, Values: []sources.Value{e.ID}}
			}
			v.Evidence = append(v.Evidence, inspect.EvidenceRow{Row: row, Reversed: e.Reversed})
		}
		for _, in := range s.Intents {
			iv := inspect.IntentView{RequestID: in.RequestID, Outcome: inspect.IntentOutcome(in.Outcome)}
			if in.Acked {
				iv.AckedAt = &acked
			}
			if t, err := time.Parse(time.RFC3339Nano, in.SentAt); err == nil {
				iv.SentAt = &t
			}
			v.Intents = append(v.Intents, iv)
		}
		if s.ProbeCount != nil {
			n := *s.ProbeCount
			v.Probe = &inspect.ProbeView{Count: &n}
		}
		if b := s.Binlog; b != nil {
			v.Binlog = &inspect.BinlogView{Key: b.Key, Delta: b.Delta, CountMin: b.CountMin, CountMax: b.CountMax,
				Competitors: []sources.Competitor{}, Shared: []sources.SharedChange{}}
			for _, c := range b.Competitors {
				v.Binlog.Competitors = append(v.Binlog.Competitors, sources.Competitor{BizID: c})
			}
			for _, id := range b.Shared {
				v.Binlog.Shared = append(v.Binlog.Shared, sources.SharedChange{ID: id})
			}
		}
		r.Steps = append(r.Steps, v)
	}
	r.Kafka = inspect.KafkaView{Redelivery: o.Redelivery, Located: o.Kafka.Located, Partition: o.Kafka.Partition, Offset: o.Kafka.Offset, Detail: o.Kafka.Detail}
	return r
}

// evidence is the evidence the planner reads beyond the report, rebuilt
// from what the plan records: the record read back, the group membership
// of the lease owner, and which sources answered.
func (o Observed) evidence() *sources.Evidence {
	ev := &sources.Evidence{Sources: maps.Clone(o.Sources)}
	ev.DB.ActionColumn = o.ActionColumn
	for _, d := range o.Deleted {
		rec := &sources.DeletedRecord{Key: d.Key}
		for _, f := range d.Row {
			rec.Columns = append(rec.Columns, f.Name)
			rec.Values = append(rec.Values, f.Value)
		}
		ev.DB.Audit = append(ev.DB.Audit, sources.AuditAction{Action: sources.AuditFlipSkipped, Outcome: sources.AuditApplied, Deleted: rec})
	}
	if m := o.Kafka.Message; m != nil {
		ev.Kafka.Message = &sources.Message{Partition: m.Partition, Offset: m.Offset, Key: slices.Clone(m.Key), Value: slices.Clone(m.Value), Headers: maps.Clone(m.Headers)}
	}
	if o.State.OwnerMember != nil && *o.State.OwnerMember {
		ev.Kafka.Group.Members = []sources.GroupMember{{ClientID: o.State.Owner}}
	}
	return ev
}

// Change is one difference between two fingerprints: Field went From → To
// ("" with Gone or New when the field is missing on one side).
type Change struct {
	Field string `json:"field"`
	From  string `json:"from"`
	To    string `json:"to"`
}

// String renders "state.version: 4 → 5".
func (c Change) String() string {
	from, to := c.From, c.To
	if from == "" {
		from = "(none)"
	}
	if to == "" {
		to = "(none)"
	}
	return fmt.Sprintf("%s: %s → %s", c.Field, from, to)
}

type kv struct{ k, v string }

// fields flattens a fingerprint into ordered field: value pairs; every
// recorded fact the planner reads is one field or follows from one.
func (o Observed) fields() []kv {
	var out []kv
	add := func(k, v string) { out = append(out, kv{k, v}) }
	add("verdict", string(o.Verdict))
	add("kafka.redelivery", string(o.Redelivery))
	for _, k := range []string{"mysql", "kafka"} {
		if v, ok := o.Sources[k]; ok {
			add("sources."+k, v)
		}
	}
	add("state.found", strconv.FormatBool(o.State.Found))
	if o.State.Found {
		add("state.status", o.State.Status)
		if o.State.Version != nil {
			add("state.version", strconv.FormatInt(*o.State.Version, 10))
		}
		add("state.owner", o.State.Owner)
		add("state.lease_until", o.State.LeaseUntil)
		add("state.lease_active", strconv.FormatBool(o.State.LeaseActive))
		add("state.msg_id", o.State.MsgID)
		if o.State.OwnerMember != nil {
			add("state.owner_member", strconv.FormatBool(*o.State.OwnerMember))
		}
	}
	for _, x := range o.Idempotency {
		add("idempotency["+x.Key+"].action", x.Action)
	}
	if o.ActionColumn != "" {
		add("idempotency.action_column", o.ActionColumn)
	}
	for _, d := range o.Deleted {
		add("idempotency["+d.Key+"].deleted", imageText(d.Row))
	}
	if o.Entity != nil {
		if o.Entity.Found {
			add("entity.status", o.Entity.Status)
		} else {
			add("entity.status", "(not found)")
		}
	}
	for _, s := range o.Steps {
		p := "steps." + s.Name
		add(p+".status", s.Status)
		add(p+".count", strconv.Itoa(s.Count))
		for _, e := range s.Evidence {
			v := "live"
			if e.Reversed {
				v = "reversed"
			}
			add(p+".evidence["+e.ID+"]", v)
			for _, f := range e.Row {
				val := "NULL"
				if f.Value != nil {
					val = *f.Value
				}
				add(p+".evidence["+e.ID+"]."+f.Name, val)
			}
		}
		for _, in := range s.Intents {
			add(p+".intents["+in.RequestID+"]", in.Outcome)
			if in.SentAt != "" {
				add(p+".intents["+in.RequestID+"].sent_at", in.SentAt)
			}
		}
		if s.ProbeCount != nil {
			add(p+".probe.count", strconv.Itoa(*s.ProbeCount))
		}
		if b := s.Binlog; b != nil {
			add(p+".binlog.row", b.Key+" by "+b.Delta)
			add(p+".binlog.count", fmt.Sprintf("%d to %d", b.CountMin, b.CountMax))
			add(p+".binlog.competitors", strings.Join(b.Competitors, ","))
			add(p+".binlog.shared", strings.Join(b.Shared, ","))
		}
		if s.Error != "" {
			add(p+".error", s.Error)
		}
	}
	k := o.Kafka
	add("kafka.located", k.Located)
	if k.Partition != nil {
		add("kafka.partition", strconv.FormatInt(int64(*k.Partition), 10))
	}
	if k.Offset != nil {
		add("kafka.offset", strconv.FormatInt(*k.Offset, 10))
	}
	if k.RedrivePartitions > 0 {
		add("kafka.redrive_partitions", strconv.FormatInt(int64(k.RedrivePartitions), 10))
	}
	if m := k.Message; m != nil {
		add("kafka.message", m.digest())
	}
	return out
}

// digest names a record by position and content: "p5@1234 sha256:1a2b3c4d5e6f".
func (m *ObservedMessage) digest() string {
	b, _ := json.Marshal(struct {
		K, V []byte
		H    map[string]string
	}{m.Key, m.Value, m.Headers})
	sum := sha256.Sum256(b)
	return fmt.Sprintf("p%d@%d sha256:%s", m.Partition, m.Offset, hex.EncodeToString(sum[:6]))
}

// Diff lists what changed from old to new, field by field, in old's order
// then the fields only new has. Empty means equal.
func Diff(old, new Observed) []Change {
	of, nf := old.fields(), new.fields()
	nm := make(map[string]string, len(nf))
	for _, x := range nf {
		nm[x.k] = x.v
	}
	om := make(map[string]bool, len(of))
	var out []Change
	for _, x := range of {
		om[x.k] = true
		v, ok := nm[x.k]
		if !ok {
			out = append(out, Change{Field: x.k, From: x.v})
		} else if v != x.v {
			out = append(out, Change{Field: x.k, From: x.v, To: v})
		}
	}
	for _, x := range nf {
		if !om[x.k] {
			out = append(out, Change{Field: x.k, To: x.v})
		}
	}
	return out
}

// ConfigFingerprint is the hex sha256 of a pipeline's canonical
// configuration (its parsed form, marshalled as JSON) together with the
// audit table name: a plan records it, and apply refuses a plan whose
// pipeline changed since.
func ConfigFingerprint(p *config.Pipeline, auditTable string) string {
	b, _ := json.Marshal(struct {
		Pipeline   *config.Pipeline
		AuditTable string
	}{p, auditTable})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// wall formats a DATETIME as its wall clock (the zone ignored: a DATETIME has
// none).
func wall(t time.Time) string { return t.Format("2006-01-02 15:04:05.999999") }
