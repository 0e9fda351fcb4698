package plans

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources/config"
)

// Observed is the fingerprint of what a plan was built from (docs/repair.md): the
// state row, the idempotency records, the entity's status, each step's
// evidence identities (reversed flagged) and intents, the verdict and
// Kafka's redelivery answer. The committed offset itself is left out: it
// moves all the time, and only the redelivery answer matters.
type Observed struct {
	Verdict     inspect.Code             `json:"verdict"`
	Redelivery  inspect.RedeliveryAnswer `json:"redelivery"`
	State       ObservedState            `json:"state"`
	Idempotency []ObservedRecord         `json:"idempotency"`
	Entity      *ObservedEntity          `json:"entity,omitempty"`
	Steps       []ObservedStep           `json:"steps"`
}

// ObservedState is the state row as fingerprinted.
type ObservedState struct {
	Found   bool   `json:"found"`
	Status  string `json:"status,omitempty"`
	Version *int64 `json:"version,omitempty"`
	Owner   string `json:"owner,omitempty"`
	// LeaseUntil is the lease's expiry as the database wrote it ("" none).
	LeaseUntil string `json:"lease_until,omitempty"`
}

// ObservedRecord is one idempotency record.
type ObservedRecord struct {
	Key    string `json:"key"`
	Action string `json:"action"`
}

// ObservedEntity is the entity's status.
type ObservedEntity struct {
	Found  bool   `json:"found"`
	Status string `json:"status"`
}

// ObservedStep is one step's evidence identities and intents.
type ObservedStep struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	// Evidence maps each row identity to live or reversed, in query order.
	Evidence []ObservedRow `json:"evidence,omitempty"`
	// Intents are the intents' request ids and outcomes (acked, applied,
	// absent, unknown, compensated).
	Intents []ObservedIntent `json:"intents,omitempty"`
	// ProbeCount is a {biz_id} probe's effect count.
	ProbeCount *int `json:"probe_count,omitempty"`
}

// ObservedRow is one evidence row identity.
type ObservedRow struct {
	ID       string `json:"id"`
	Reversed bool   `json:"reversed,omitempty"`
}

// ObservedIntent is one intent.
type ObservedIntent struct {
	RequestID string `json:"request_id"`
	Acked     bool   `json:"acked"`
	Outcome   string `json:"outcome"`
}

// Observe computes the fingerprint of a report.
func Observe(r inspect.Report) Observed {
	o := Observed{Verdict: r.Verdict.Code, Redelivery: r.Kafka.Redelivery, Idempotency: []ObservedRecord{}, Steps: []ObservedStep{}}
	if r.State.Found {
		o.State = ObservedState{Found: true, Status: r.State.Status, Version: r.State.Version, Owner: r.State.Owner}
		if r.State.LeaseUntil != nil {
			o.State.LeaseUntil = wall(*r.State.LeaseUntil)
		}
	}
	for _, x := range r.Idempotency {
		o.Idempotency = append(o.Idempotency, ObservedRecord{Key: x.Key, Action: x.Action})
	}
	if r.Entity != nil {
		o.Entity = &ObservedEntity{Found: r.Entity.Found, Status: r.Entity.Status}
	}
	for _, s := range r.Steps {
		os := ObservedStep{Name: s.Name, Status: string(s.Status)}
		for _, e := range s.Evidence {
			os.Evidence = append(os.Evidence, ObservedRow{ID: inspect.IdentityString(e.Identity()), Reversed: e.Reversed})
		}
		for _, in := range s.Intents {
			os.Intents = append(os.Intents, ObservedIntent{RequestID: in.RequestID, Acked: in.AckedAt != nil, Outcome: string(in.Outcome)})
		}
		if s.Probe != nil && s.Probe.Count != nil {
			n := *s.Probe.Count
			os.ProbeCount = &n
		}
		o.Steps = append(o.Steps, os)
	}
	return o
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

// fields flattens a fingerprint into ordered field: value pairs.
func (o Observed) fields() []kv {
	var out []kv
	add := func(k, v string) { out = append(out, kv{k, v}) }
	add("verdict", string(o.Verdict))
	add("kafka.redelivery", string(o.Redelivery))
	add("state.found", strconv.FormatBool(o.State.Found))
	if o.State.Found {
		add("state.status", o.State.Status)
		if o.State.Version != nil {
			add("state.version", strconv.FormatInt(*o.State.Version, 10))
		}
		add("state.owner", o.State.Owner)
		add("state.lease_until", o.State.LeaseUntil)
	}
	for _, x := range o.Idempotency {
		add("idempotency["+x.Key+"].action", x.Action)
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
		for _, e := range s.Evidence {
			v := "live"
			if e.Reversed {
				v = "reversed"
			}
			add(p+".evidence["+e.ID+"]", v)
		}
		for _, in := range s.Intents {
			add(p+".intents["+in.RequestID+"]", in.Outcome)
		}
		if s.ProbeCount != nil {
			add(p+".probe.count", strconv.Itoa(*s.ProbeCount))
		}
	}
	return out
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
