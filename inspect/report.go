package inspect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/opctl-dev/opctl/sources"
)

// Report is the triage of one operation in one pipeline: the JSON object of
// `opctl where -o json` (docs/where.md).
type Report struct {
	BizID       string            `json:"biz_id"`
	Pipeline    string            `json:"pipeline"`
	Verdict     Verdict           `json:"verdict"`
	Findings    []Finding         `json:"findings"`
	State       StateView         `json:"state"`
	Steps       []StepView        `json:"steps"`
	Idempotency []IdempotencyView `json:"idempotency"`
	Entity      *EntityView       `json:"entity"`
	Kafka       KafkaView         `json:"kafka"`
	Timeline    []Event           `json:"timeline"`
	// Repair is opctl's newest plan of the operation when it stopped
	// part-way (REPAIR_INCOMPLETE).
	Repair  *RepairView       `json:"repair,omitempty"`
	Partial bool              `json:"partial"`
	Sources map[string]string `json:"sources"`
	// DBNow is the database clock the time comparisons used.
	DBNow *time.Time `json:"db_now"`
}

// Unread names, sorted, the sources of the report that were not read: a
// source whose status (Sources) is neither sources.StatusOK nor
// sources.StatusSkipped holds why it could not be read, and makes the
// report partial (docs/verdicts.md#partial). A partial report always has
// one: Diagnose names every failed query in Sources["mysql"].
func (r Report) Unread() []string {
	var out []string
	for k, v := range r.Sources {
		if v != sources.StatusOK && v != sources.StatusSkipped {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Verdict is the one named diagnosis of the operation.
type Verdict struct {
	Code     Code     `json:"code"`
	Severity Severity `json:"severity"`
	Summary  string   `json:"summary"`
	// Next is the NEXT as shell lines (docs/where.md): `opctl where`
	// renders the planner's steps into it (repair/plans.Next); Diagnose
	// leaves it empty.
	Next []string `json:"next"`
}

// Finding is one anomaly (or informational fact) seen in the evidence.
type Finding struct {
	Code   Code   `json:"code"`
	Step   string `json:"step,omitempty"`
	Detail string `json:"detail"`
}

// StateView is the state row as shown.
type StateView struct {
	Found      bool       `json:"found"`
	Status     string     `json:"status"`
	Version    *int64     `json:"version"`
	Owner      string     `json:"owner"`
	LeaseUntil *time.Time `json:"lease_until"`
	// LeaseActive is true when lease_until is after the database clock.
	LeaseActive bool       `json:"lease_active"`
	MsgID       string     `json:"msg_id,omitempty"`
	CreatedAt   *time.Time `json:"created_at,omitempty"`
	UpdatedAt   *time.Time `json:"updated_at"`
	// Reached is how many steps the status claims done; -1 when it claims nothing.
	Reached int `json:"reached"`
}

// StepView is one step's status and the evidence behind it.
type StepView struct {
	Index         int           `json:"index"`
	Name          string        `json:"name"`
	Kind          string        `json:"kind"`
	Status        StepStatus    `json:"status"`
	EvidenceCount int           `json:"evidence_count"`
	Evidence      []EvidenceRow `json:"evidence"`
	Intents       []IntentView  `json:"intents,omitempty"`
	Probe         *ProbeView    `json:"probe,omitempty"`
	// Reached says whether the state row claims this step done (null without
	// a claim, or for a step whose status the state row cannot record: no
	// done_status of its own and no later status claimed).
	Reached *bool  `json:"reached"`
	Error   string `json:"error,omitempty"`
	// Note says what opctl could not verify about the step (an unverified
	// remote step: docs/verdicts.md#unverified-steps).
	Note string `json:"note,omitempty"`
	// Binlog is how a binlog step's changes were weighed against the other
	// operations that may own them (docs/where.md#binlog-evidence).
	Binlog *BinlogView `json:"binlog,omitempty"`
}

// BinlogView is the attribution of a binlog step's changes: the row and
// delta, the operation's count over every assignment of the changes, the
// other operations that may own them, and what limited the search.
type BinlogView struct {
	Key         string                 `json:"key"`
	Delta       string                 `json:"delta"`
	CountMin    int                    `json:"count_min"`
	CountMax    int                    `json:"count_max"`
	Competitors []sources.Competitor   `json:"competitors"`
	Shared      []sources.SharedChange `json:"shared"`
	Notes       []string               `json:"notes,omitempty"`
	// Attested is set when opctl's audit attests the step as a whole
	// (applied or absent): it then decides the count.
	Attested string `json:"attested,omitempty"`
}

// StepStatus is what a step's effects say (docs/verdicts.md).
type StepStatus string

// Step statuses.
const (
	StepApplied    StepStatus = "applied"
	StepAbsent     StepStatus = "absent"
	StepDuplicated StepStatus = "duplicated"
	StepUnknown    StepStatus = "unknown"
	StepAhead      StepStatus = "ahead"
	// StepAmbiguous: a binlog step whose count depends on which of the
	// changes other operations own (docs/where.md#binlog-evidence).
	StepAmbiguous StepStatus = "ambiguous"
	// StepUnverified: a remote step with neither intent nor probe. It is
	// never absent, unknown or duplicated: opctl cannot see its effect
	// (docs/verdicts.md#unverified-steps).
	StepUnverified StepStatus = "unverified"
)

// EvidenceRow is one evidence row, marshalled as an object in column order.
type EvidenceRow struct {
	sources.Row
	// Reversed is true when opctl's audit (or the row's `reversed` column)
	// says the row was reversed; it then no longer counts as an effect.
	Reversed bool
}

// MarshalJSON writes the row as {"col": value, ...} in column order, with
// "reversed": true appended for a reversed row.
func (r EvidenceRow) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, c := range r.Columns {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(c)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(jsonValue(r.Values[i]))
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	if r.Reversed {
		if len(r.Columns) > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"reversed":true`)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func jsonValue(v sources.Value) any {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	}
	return v
}

// IntentView is one intent of a remote step.
type IntentView struct {
	RequestID string        `json:"request_id"`
	SentAt    *time.Time    `json:"sent_at"`
	AckedAt   *time.Time    `json:"acked_at"`
	Result    string        `json:"result,omitempty"`
	Outcome   IntentOutcome `json:"outcome"`
	Probe     string        `json:"probe,omitempty"`
}

// IntentOutcome is what is known of one remote call (docs/verdicts.md).
type IntentOutcome string

// Intent outcomes: acked by the consumer, applied or absent by the probe or
// an attestation, compensated (a duplicate the downstream reversed), or
// unknown.
const (
	IntentAcked       IntentOutcome = "acked"
	IntentApplied     IntentOutcome = "applied"
	IntentAbsent      IntentOutcome = "absent"
	IntentCompensated IntentOutcome = AttestCompensated
	IntentUnknown     IntentOutcome = "unknown"
)

// Counts reports whether the call counts as an effect of its step.
func (o IntentOutcome) Counts() bool { return o == IntentAcked || o == IntentApplied }

// ProbeView is the answer of a probe keyed by {biz_id}.
type ProbeView struct {
	URL     string `json:"url"`
	Outcome string `json:"outcome"`
	Count   *int   `json:"count,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// IdempotencyView is one idempotency record.
type IdempotencyView struct {
	Key       string     `json:"key"`
	Action    string     `json:"action"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
}

// EntityView is the entity's current status.
type EntityView struct {
	Found  bool   `json:"found"`
	Status string `json:"status"`
}

// KafkaView is the message's position and whether Kafka will redeliver it.
type KafkaView struct {
	Topic          string `json:"topic"`
	Partition      *int32 `json:"partition"`
	Offset         *int64 `json:"offset"`
	Committed      *int64 `json:"committed"`
	LogStart       *int64 `json:"log_start"`
	LogEnd         *int64 `json:"log_end"`
	Lag            *int64 `json:"lag"`       // the group's lag on the partition (PartitionLag); null when not read
	GroupLag       *int64 `json:"group_lag"` // the group's total lag on the topic (GroupLag); null when not read
	GroupState     string `json:"group_state"`
	PartitionOwner string `json:"partition_owner"`
	// Redelivery is yes, no or unknown.
	Redelivery RedeliveryAnswer `json:"redelivery"`
	// Located is stored, searched, republished or unknown.
	Located string `json:"located"`
	Detail  string `json:"detail,omitempty"`
	// Unknown names the fields above that a Kafka request that failed, or
	// that the broker does not support, would have given, with why; the
	// other fields were read (docs/where.md "When a Kafka request fails").
	Unknown map[string]string `json:"unknown,omitempty"`
}

// Event is one timeline entry.
type Event struct {
	At     time.Time `json:"at"`
	Source string    `json:"source"`
	What   string    `json:"what"`
	// Resolution is "1s" for a time known to the second only (a binlog
	// event's): At is the start of that second, and the event is placed
	// after every other event of it (docs/where.md#binlog-evidence).
	Resolution string `json:"resolution,omitempty"`
}

// ResolutionSecond is the resolution of a binlog event's time.
const ResolutionSecond = "1s"

// sortAt is the time an event sorts at: one known to the second only sorts
// at the end of its second, after every event that second holds (it may
// have happened at any point of it; a debit then follows its own message).
func (e Event) sortAt() time.Time {
	if e.Resolution == ResolutionSecond {
		return e.At.Truncate(time.Second).Add(time.Second - time.Nanosecond)
	}
	return e.At
}

// RedeliveryAnswer says whether Kafka will hand the message to the group
// again (see Redelivery).
type RedeliveryAnswer string

// Redelivery values.
const (
	RedeliveryYes     RedeliveryAnswer = "yes"
	RedeliveryNo      RedeliveryAnswer = "no"
	RedeliveryUnknown RedeliveryAnswer = "unknown"
)

// String renders a finding for logs and plain output.
func (f Finding) String() string {
	if f.Step != "" {
		return fmt.Sprintf("%s [%s] %s", f.Code, f.Step, f.Detail)
	}
	return fmt.Sprintf("%s %s", f.Code, f.Detail)
}

// Target is one line of a targets file: an operation `opctl reconcile`
// found that needs an action (written with --out or -o jsonl), and the
// input of `opctl repair plan --from-file` (docs/reconcile.md). Unknown
// fields are ignored on reading.
type Target struct {
	BizID    string `json:"biz_id"`
	Pipeline string `json:"pipeline"`
	Check    string `json:"check"`
	Verdict  Code   `json:"verdict"`
	// Step is set when exactly one step is at fault.
	Step   string `json:"step,omitempty"`
	Detail string `json:"detail"`
	// Partial is true when a source could not be read (a MySQL query, then
	// the verdict is READ_ERROR or one drawn from what was read; Kafka):
	// the verdict was computed without it.
	Partial bool `json:"partial,omitempty"`
}
