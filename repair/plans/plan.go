// Package plans is the pure half of repairs: it turns an operation's
// triage (an inspect.Report and the evidence behind it) into a plan of
// guarded actions (Build), and owns the plan file: canonical JSON whose id
// is the sha256 of its body (Seal, Verify, Encode, Decode), the fingerprint
// of what a plan observed (Observe, Diff), and its rendering as a readable
// diff (Render). It does no I/O: it imports neither a driver nor
// database/sql (a test checks it), so every rule is testable on plain
// structs. docs/repair.md describes the rules and the file format.
package plans

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
)

// PlanVersion is the plan file format version written by this package.
const PlanVersion = 1

// ActionType names what an action does (docs/repair.md).
type ActionType string

// Action types.
const (
	AdvanceState     ActionType = sources.AuditAdvanceState
	RewindState      ActionType = sources.AuditRewindState
	Republish        ActionType = sources.AuditRepublish
	FlipSkipped      ActionType = sources.AuditFlipSkipped
	Reverse          ActionType = sources.AuditReverse
	CompensateRemote ActionType = sources.AuditCompensateRemote
	// Redrive makes a remote step's effect at the downstream (its
	// `redrive` POST): the forward twin of compensate_remote.
	Redrive      ActionType = sources.AuditRedrive
	ReleaseLease ActionType = sources.AuditReleaseLease
	Manual       ActionType = sources.AuditManual
)

// ActionTypes lists the action types in the documented order.
func ActionTypes() []ActionType {
	return []ActionType{AdvanceState, RewindState, Republish, FlipSkipped, Reverse, CompensateRemote, Redrive, ReleaseLease, Manual}
}

// ActionTypeNames lists the action types as strings (flags, completion).
func ActionTypeNames() []string {
	var out []string
	for _, t := range ActionTypes() {
		out = append(out, string(t))
	}
	return out
}

// IsActionType reports whether s names an action type.
func IsActionType(s string) bool {
	for _, t := range ActionTypes() {
		if string(t) == s {
			return true
		}
	}
	return false
}

// Record headers opctl adds to the messages it republishes (docs/repair.md,
// docs/design.md "Replays from opctl").
const (
	HeaderPlan        = "opctl-plan"
	HeaderFromStep    = "opctl-from-step"
	HeaderForceEffect = "opctl-force-effect"
	// HeaderMsgID is the message id header kept on every republished record.
	HeaderMsgID = "msg_id"
)

// Plan is a reviewed, guarded repair of one operation (docs/repair.md). Its ID is
// the sha256 of its canonical body (see Seal); a plan whose body changed no
// longer verifies and is refused.
type Plan struct {
	PlanVersion int `json:"plan_version"`
	// ID is the hex sha256 of the canonical JSON of the plan with ID "".
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	// Operator is who built the plan (the applier is recorded in the audit).
	Operator string `json:"operator"`
	Reason   string `json:"reason"`
	Pipeline string `json:"pipeline"`
	BizID    string `json:"biz_id"`
	// Verdict is the verdict the plan was built for.
	Verdict inspect.Code `json:"verdict"`
	// ConfigFingerprint is the sha256 of the pipeline's canonical
	// configuration (ConfigFingerprint); apply refuses a plan whose
	// pipeline changed.
	ConfigFingerprint string `json:"config_fingerprint"`
	// Forced is true when --force made an action act on a verdict that does
	// not call for it.
	Forced bool `json:"forced,omitempty"`
	// Attest is the operator's statement for manual actions (--attest).
	Attest string `json:"attest,omitempty"`
	// Runbook and RunID name the runbook run (opctl sop run) that made the
	// plan, when one did (docs/runbooks.md "Run records").
	Runbook string `json:"runbook,omitempty"`
	RunID   string `json:"run_id,omitempty"`
	// Incident names the incident the plan was made in (opctl tui --incident).
	Incident string `json:"incident,omitempty"`
	// Request is what the operator asked for besides the reason: apply
	// rebuilds the actions from it, Observed and the configuration.
	Request Request `json:"request"`
	// Notes are what a reviewer should know (a replay record instead of a
	// copy, no republish because Kafka will redeliver, ...).
	Notes []string `json:"notes,omitempty"`
	// Observed is the fingerprint of what was read when the plan was made;
	// apply compares it with what it reads (the stale check).
	Observed Observed `json:"observed"`
	Actions  []Action `json:"actions"`
}

// Request is the operator's choices a plan was built with (the flags of
// `opctl repair plan` other than --reason and --attest, which the plan
// holds itself).
type Request struct {
	Action   ActionType `json:"action,omitempty"`
	FromStep string     `json:"from_step,omitempty"`
	Force    bool       `json:"force,omitempty"`
	Outcome  string     `json:"outcome,omitempty"`
}

// Action is one guarded step of a plan. Exactly one of the type-specific
// parts is set, by Type.
type Action struct {
	// Index is the action's 1-based position in the plan (audit
	// action_index).
	Index int        `json:"index"`
	Type  ActionType `json:"type"`
	// Step is the pipeline step the action is about, when any.
	Step    string `json:"step,omitempty"`
	Summary string `json:"summary"`
	// Guards are re-checked at apply, under SELECT ... FOR UPDATE for
	// database facts, before the action changes anything.
	Guards []Guard `json:"guards"`

	State      *StateChange    `json:"state,omitempty"`
	Reverse    *ReverseSpec    `json:"reverse,omitempty"`
	Flip       *FlipSpec       `json:"flip,omitempty"`
	Publish    *PublishSpec    `json:"publish,omitempty"`
	Compensate *CompensateSpec `json:"compensate,omitempty"`
	Redrive    *RedriveSpec    `json:"redrive,omitempty"`
	Manual     *ManualSpec     `json:"manual,omitempty"`
	// Attested is what the action attests about Step's effects (request id,
	// evidence identity or "*" → applied | absent | compensated | reversed);
	// it is written to the audit's after_image, where `where` reads it.
	Attested map[string]string `json:"attested,omitempty"`
}

// StateChange is a write of the state row: advance_state, rewind_state,
// release_lease. Every write increments the version (when configured) and
// sets updated_at to NOW(3), under a CAS on the version read.
type StateChange struct {
	Table string `json:"table"`
	// Insert creates the state row (there was none).
	Insert bool `json:"insert,omitempty"`
	// FromStatus and ToStatus: the status before and after ("" for no row).
	FromStatus string `json:"from_status"`
	ToStatus   string `json:"to_status"`
	// FromVersion and ToVersion are nil without a version column.
	FromVersion *int64 `json:"from_version,omitempty"`
	ToVersion   *int64 `json:"to_version,omitempty"`
	// ReleaseOwner is the owner whose lease release_lease clears.
	ReleaseOwner string `json:"release_owner,omitempty"`
	// MsgID, Partition and Offset fill a created row's columns.
	MsgID     string `json:"msg_id,omitempty"`
	Partition *int32 `json:"partition,omitempty"`
	Offset    *int64 `json:"offset,omitempty"`
}

// ReverseSpec is a reverse action: the step's configured reverse
// statements, bound from one evidence row.
type ReverseSpec struct {
	// Identity is the evidence row's identity (its first column).
	Identity string `json:"identity"`
	// Row is the evidence row as read when planning; apply re-reads it
	// under FOR UPDATE, refuses if it changed, and binds from it.
	Row Image `json:"row"`
	// Statements are the step's reverse statements (from the config).
	Statements []string `json:"statements"`
}

// FlipSpec is a flip_skipped action: the idempotency record's action goes
// From → To under a CAS on From.
type FlipSpec struct {
	Table string `json:"table"`
	Key   string `json:"key"`
	From  string `json:"from"`
	To    string `json:"to"`
	// Delete reopens the record by deleting it (idempotency.reopen:
	// delete, or an action column that cannot hold PENDING): its whole row
	// is kept in the audit's before_image; To is then "".
	Delete bool `json:"delete,omitempty"`
}

// PublishSpec is a republish action.
type PublishSpec struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// PartitionRule says how the partition was chosen ("murmur2 of the key
	// over 8 partitions", "stored").
	PartitionRule string `json:"partition_rule"`
	Key           []byte `json:"key"`
	Value         []byte `json:"value"`
	// Headers are the record's headers without opctl-plan, which apply adds
	// (the plan id cannot be part of the body it hashes).
	Headers map[string]string `json:"headers"`
	// Copy is true when Key, Value and Headers copy the original record;
	// false for a replay record {"biz_id","msg_id","replay":true}.
	Copy bool `json:"copy"`
	// Source is the original record's position, when it was read.
	Source *Position `json:"source,omitempty"`
	MsgID  string    `json:"msg_id"`
	// FromStep or ForceEffect: the step the consumer resumes at, or whose
	// effect it must run even though its skip rule would skip it.
	FromStep    string `json:"from_step,omitempty"`
	ForceEffect string `json:"force_effect,omitempty"`
}

// Position is a Kafka record position.
type Position struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// CompensateSpec is a compensate_remote action: an HTTP POST to the step's
// compensate URL.
type CompensateSpec struct {
	// URL is the compensate URL without userinfo (apply expands the
	// configured template again: credentials never enter a plan).
	URL string `json:"url"`
	// RequestID is the call compensated, for a template keyed by
	// {request_id}.
	RequestID string `json:"request_id,omitempty"`
	// ProbeCount is the effect count a {biz_id} probe must still report
	// before the POST (nil: no such probe).
	ProbeCount *int `json:"probe_count,omitempty"`
}

// RedriveSpec is a redrive action: an HTTP POST to the step's redrive URL
// that makes its effect at the downstream (docs/repair.md#redrive).
type RedriveSpec struct {
	// URL is the redrive URL without userinfo (apply expands the
	// configured template again).
	URL string `json:"url"`
	// RequestID fills {request_id} of a template keyed by it.
	RequestID string `json:"request_id,omitempty"`
	// ProbeCount is the effect count a {biz_id} probe must still report
	// before the POST (nil: no such probe); one more after it.
	ProbeCount *int `json:"probe_count,omitempty"`
}

// ManualSpec is a manual action: the operator did something by hand (or
// learnt a downstream's answer) and attests it; opctl records it.
type ManualSpec struct {
	// Instructions say what the operator must have done.
	Instructions string `json:"instructions"`
	// Attest is the operator's statement (--attest).
	Attest string `json:"attest"`
}

// Guard is one precondition of an action, re-checked at apply.
type Guard struct {
	// Check is what is read: state.found, state.version, state.status,
	// state.owner, lease, owner, idempotency.action, evidence.count,
	// evidence.row, entity.status, intent.acked, intents.acked,
	// probe.count, probe.outcome.
	Check string `json:"check"`
	Step  string `json:"step,omitempty"`
	// Key is an idempotency key, an evidence identity or a request id.
	Key string `json:"key,omitempty"`
	// Op is ==, inactive (lease), live (evidence.row), not_member (owner),
	// absent (idempotency.action: no such record).
	Op    string `json:"op"`
	Value string `json:"value,omitempty"`
}

// Guard checks.
const (
	CheckStateFound   = "state.found"
	CheckStateVersion = "state.version"
	CheckStateStatus  = "state.status"
	CheckStateOwner   = "state.owner"
	CheckLease        = "lease"
	CheckOwnerMember  = "owner"
	CheckIdemAction   = "idempotency.action"
	CheckEvidenceN    = "evidence.count"
	CheckEvidenceRow  = "evidence.row"
	CheckEntityStatus = "entity.status"
	CheckIntentAcked  = "intent.acked"
	CheckIntentsAcked = "intents.acked"
	CheckProbeCount   = "probe.count"
	CheckProbeOutcome = "probe.outcome"
)

// String renders the guard as the plan shows it: "state.version == 4",
// "lease not active", "evidence(debit).count == 2".
func (g Guard) String() string {
	switch g.Check {
	case CheckLease:
		return "lease not active"
	case CheckOwnerMember:
		return fmt.Sprintf("owner %s is not a member of group %s", Quote(g.Key), g.Value)
	case CheckEvidenceRow:
		return fmt.Sprintf("evidence(%s)[%s] is live and unchanged", g.Step, g.Key)
	case CheckEvidenceN:
		return fmt.Sprintf("evidence(%s).count == %s", g.Step, g.Value)
	case CheckIntentsAcked:
		return fmt.Sprintf("intents(%s).acked == %s", g.Step, g.Value)
	case CheckIntentAcked:
		return fmt.Sprintf("intent(%s)[%s].acked == %s", g.Step, Quote(g.Key), g.Value)
	case CheckProbeCount:
		return fmt.Sprintf("probe(%s).count == %s", g.Step, g.Value)
	case CheckProbeOutcome:
		return fmt.Sprintf("probe(%s)[%s] == %s", g.Step, Quote(g.Key), g.Value)
	case CheckIdemAction:
		if g.Op == "absent" {
			return fmt.Sprintf("idempotency[%s] does not exist", Quote(g.Key))
		}
		return fmt.Sprintf("idempotency[%s].action == %s", Quote(g.Key), Quote(g.Value))
	case CheckStateStatus, CheckStateOwner, CheckEntityStatus:
		return fmt.Sprintf("%s == %s", g.Check, Quote(g.Value))
	}
	return fmt.Sprintf("%s %s %s", g.Check, g.Op, g.Value)
}

// Quote quotes a value for a guard or a message: 'text'.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

// Image is one row as plain text, in column order: {"id":"11","delta":"-30.00"}
// in JSON. A NULL is a nil value.
type Image []Field

// Field is one column of an Image.
type Field struct {
	Name  string
	Value *string
}

// Get returns the value of the named column and whether it exists.
func (im Image) Get(name string) (*string, bool) {
	for _, f := range im {
		if f.Name == name {
			return f.Value, true
		}
	}
	return nil, false
}

// MarshalJSON writes the image as an object in column order.
func (im Image) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range im {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.Name)
		b.Write(k)
		b.WriteByte(':')
		if f.Value == nil {
			b.WriteString("null")
		} else {
			v, _ := json.Marshal(*f.Value)
			b.Write(v)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads an object of strings and nulls, keeping its order.
func (im *Image) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return errors.New("row image: want an object")
	}
	out := Image{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ := kt.(string)
		vt, err := dec.Token()
		if err != nil {
			return err
		}
		switch v := vt.(type) {
		case nil:
			out = append(out, Field{Name: k})
		case string:
			out = append(out, Field{Name: k, Value: &v})
		default:
			return fmt.Errorf("row image: column %q: want a string or null", k)
		}
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	*im = out
	return nil
}

// body is the canonical JSON of the plan with ID "".
func (p *Plan) body() ([]byte, error) {
	c := *p
	c.ID = ""
	return json.Marshal(&c)
}

// Hash returns the hex sha256 of the plan's canonical body: the plan
// marshalled by encoding/json (struct field order, sorted map keys, compact)
// with ID set to "".
func (p *Plan) Hash() (string, error) {
	b, err := p.body()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Seal sets the plan's ID to the hash of its body.
func (p *Plan) Seal() error {
	h, err := p.Hash()
	if err != nil {
		return err
	}
	p.ID = h
	return nil
}

// Verify checks that the plan's ID is the hash of its body and that it is a
// format this package applies. A mismatch is a *RefusedError with code
// "tampered".
func (p *Plan) Verify() error {
	if p.PlanVersion != PlanVersion {
		return &RefusedError{Code: CodeTampered, Detail: fmt.Sprintf("plan_version %d: this opctl applies version %d", p.PlanVersion, PlanVersion)}
	}
	h, err := p.Hash()
	if err != nil {
		return err
	}
	if h != p.ID {
		return &RefusedError{Code: CodeTampered, Detail: fmt.Sprintf("the plan's id %s does not match its body (sha256 %s): the file was changed after it was made", short(p.ID), short(h))}
	}
	for i, a := range p.Actions {
		if a.Index != i+1 {
			return &RefusedError{Code: CodeTampered, Detail: fmt.Sprintf("action %d has index %d", i+1, a.Index)}
		}
	}
	return nil
}

// Encode writes the plan as indented JSON (the plan file).
func Encode(w io.Writer, p *Plan) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(p)
}

// Decode reads one plan. Unknown fields are refused (a field added to a
// plan is a changed body), as is trailing data. It does not Verify.
func Decode(r io.Reader) (*Plan, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var p Plan
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("not a plan file: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not a plan file: data after the plan")
	}
	return &p, nil
}

// DecodeAll reads a JSONL stream of plans (repair plan --from-file --out).
func DecodeAll(r io.Reader) ([]*Plan, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var out []*Plan
	for {
		var p Plan
		err := dec.Decode(&p)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("plan %d: not a plan: %w", len(out)+1, err)
		}
		out = append(out, &p)
	}
}

// short abbreviates a plan id for messages.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// IsPlanID reports whether s reads as a plan id or a prefix of one that
// names it well enough: 12 to 64 lowercase hex digits (`opctl repair apply
// PLAN_ID`).
func IsPlanID(s string) bool {
	if len(s) < 12 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Short returns the first 12 characters of the plan id.
func (p *Plan) Short() string { return short(p.ID) }

func i64(n int64) *int64 { return &n }

// PtrString renders an optional number, "null" when absent.
func PtrString(p *int64) string {
	if p == nil {
		return "null"
	}
	return strconv.FormatInt(*p, 10)
}
