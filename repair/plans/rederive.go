package plans

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/opctl-dev/opctl/sources/config"
)

// Rederive rebuilds a plan from the configuration and what the plan
// records — its Observed, its Request, reason, operator, attestation,
// runbook run and created_at — and refuses it, as a *RefusedError with code tampered, when
// the rebuilt plan is not the recorded one (docs/repair.md "Integrity").
// The sha256 id only catches accidents: a plan whose statements, bound
// values, guards, topic, partition, key, headers or list of actions were
// changed and its id recomputed still verifies, but no longer rederives. So
// nothing a plan file says can run SQL or send a record the configuration
// would not, for the operation as the plan observed it; the stale check
// then compares that observation with the database and Kafka.
//
// The plan's pipeline must be in cfg with the fingerprint the plan
// recorded (apply checks that first: a changed configuration is
// config_changed, not tampered).
func Rederive(cfg *config.Config, p *Plan) (err error) {
	if cfg == nil || p == nil {
		return &RefusedError{Code: CodeTampered, Detail: "no plan or no configuration to rebuild it from"}
	}
	if err := p.Verify(); err != nil {
		return err
	}
	// The planner is written for observations the configuration could
	// have produced; one it was not would be a bug to fix, never a plan.
	defer func() {
		if r := recover(); r != nil {
			err = &RefusedError{Code: CodeTampered, Detail: fmt.Sprintf("the configuration makes no plan from what this plan observed (%v)", r)}
		}
	}()
	o := Options{Reason: p.Reason, Operator: p.Operator, Action: p.Request.Action, FromStep: p.Request.FromStep,
		Force: p.Request.Force, Attest: p.Attest, Outcome: p.Request.Outcome, Now: p.CreatedAt,
		Runbook: p.Runbook, RunID: p.RunID, Incident: p.Incident}
	if err := checkOptions(o); err != nil {
		return &RefusedError{Code: CodeTampered, Detail: "the plan records options no plan is made with: " + err.Error()}
	}
	if p.CreatedAt.IsZero() {
		return &RefusedError{Code: CodeTampered, Detail: "the plan has no created_at"}
	}
	got, err := buildFrom(cfg, p.BizID, p.Pipeline, "", p.Observed, o)
	if err != nil {
		return &RefusedError{Code: CodeTampered, Detail: "the configuration makes no plan from what this plan observed (" + err.Error() + ")"}
	}
	if got.ID == p.ID {
		return nil
	}
	return &RefusedError{Code: CodeTampered, Detail: describeChange(p, got) + ": this is not the plan opctl makes from the configuration and what the plan observed (was it edited?); make a new plan"}
}

// describeChange names the first difference between a recorded plan and
// the one rebuilt from it.
func describeChange(rec, got *Plan) string {
	if len(rec.Actions) != len(got.Actions) {
		return fmt.Sprintf("the plan has %d action(s) (%s); the verdict calls for %d (%s)", len(rec.Actions), actionTypes(rec.Actions), len(got.Actions), actionTypes(got.Actions))
	}
	for i := range rec.Actions {
		a, b := rec.Actions[i], got.Actions[i]
		if a.Type != b.Type {
			return fmt.Sprintf("action %d is %s; the verdict calls for %s", a.Index, a.Type, b.Type)
		}
		if path := firstDiff(toTree(a), toTree(b), ""); path != "" {
			return fmt.Sprintf("action %d [%s]: %s differs from what the configuration makes", a.Index, a.Type, path)
		}
	}
	r, g := *rec, *got
	r.ID, g.ID = "", ""
	r.Actions, g.Actions = nil, nil
	if path := firstDiff(toTree(r), toTree(g), ""); path != "" {
		return path + " differs from what the configuration makes"
	}
	return "the plan's body differs from what the configuration makes"
}

func actionTypes(as []Action) string {
	if len(as) == 0 {
		return "none"
	}
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = string(a.Type)
	}
	return strings.Join(s, ", ")
}

// toTree is v as generic JSON (maps, slices, strings, numbers).
func toTree(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var t any
	if json.Unmarshal(b, &t) != nil {
		return nil
	}
	return t
}

// firstDiff returns the path of the first difference between two JSON
// trees ("" when equal): "reverse.statements[0]", "guards", "publish.topic".
func firstDiff(a, b any, path string) string {
	name := func(p string) string {
		if p == "" {
			return "the plan"
		}
		return p
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return name(path)
		}
		keys := make([]string, 0, len(x)+len(y))
		for k := range x {
			keys = append(keys, k)
		}
		for k := range y {
			if _, ok := x[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub := k
			if path != "" {
				sub = path + "." + k
			}
			xv, xok := x[k]
			yv, yok := y[k]
			if xok != yok {
				return sub
			}
			if d := firstDiff(xv, yv, sub); d != "" {
				return d
			}
		}
		return ""
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return name(path)
		}
		for i := range x {
			if d := firstDiff(x[i], y[i], path+"["+strconv.Itoa(i)+"]"); d != "" {
				return d
			}
		}
		return ""
	}
	if !reflect.DeepEqual(a, b) {
		return name(path)
	}
	return ""
}
