package repair

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// brokenPublisher is a Kafka that refuses every send.
type brokenPublisher struct{}

func (brokenPublisher) Publish(context.Context, string, int32, []byte, []byte, map[string]string) (int32, int64, error) {
	return 0, 0, &sources.SendError{Source: "Kafka", Err: errors.New("kafka: broker not available")}
}

func (brokenPublisher) LogEnd(context.Context, string, int32) (int64, error) { return 0, nil }

func (brokenPublisher) FindPublished(context.Context, string, int32, int64, map[string]string) (int64, bool, error) {
	return -1, false, nil
}

// A repair that stopped part-way is visible (REPAIR_INCOMPLETE): the flip
// took effect, the republish failed and left its audit row 'publishing'.
// where says so and names the apply that finishes the plan, the plan can
// be read back from the audit by its id, reconcile's skipped check still
// meets the operation although its record is no longer SKIPPED, and
// applying the stored plan finishes it.
func TestHalfDoneRepairIsVisible(t *testing.T) {
	e := newTenv(t, td("config", "skip.yaml"),
		[]string{td("schema", "skip.sql"), td("incidents", "skip.sql")},
		[]string{"order-event"}, nil)
	ts, _ := time.Parse("2006-01-02 15:04:05", e.str("SELECT DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s') FROM consumer_idempotency WHERE msg_id = 'm-7391'"))
	part, off := e.produce("order-event", "8821", "m-7391", ts)
	e.k.Commit(t, "order-consumer", "order-event", part, off+1)
	p := e.mustPlan("orders", "8821", plans.Options{})

	ap := e.applier()
	ap.Publisher = brokenPublisher{}
	res, err := ap.Apply(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), "broker not available") || res.Applied != 1 {
		t.Fatalf("apply with a broken Kafka: %v %+v", err, res)
	}
	if a := e.str("SELECT action FROM consumer_idempotency WHERE msg_id = 'm-7391'"); a != "PENDING" {
		t.Fatalf("record %s: the flip should have taken effect", a)
	}

	r := e.where("orders", "8821")
	wantVerdict(t, r, inspect.RepairIncomplete)
	if r.Repair == nil || r.Repair.PlanID != p.ID || r.Repair.Done != 1 || r.Repair.Actions != 2 || len(r.Repair.Left) != 1 || r.Repair.Left[0].Outcome != "publishing" {
		t.Fatalf("repair view %+v", r.Repair)
	}
	if inspect.ExitCode([]inspect.Report{r}) != 3 {
		t.Fatalf("exit %d, want 3", inspect.ExitCode([]inspect.Report{r}))
	}
	if next := e.next("orders", "8821"); !slices.ContainsFunc(next, func(s plans.Step) bool { return s.Kind == plans.StepFinish && s.PlanID == p.ID }) {
		t.Fatalf("next %+v: want plan %s finished", next, p.ID)
	}
	// A new plan is refused: finish this one.
	_, _, err = e.plan("orders", "8821", plans.Options{})
	var rf *plans.RefusedError
	if !errors.As(err, &rf) || !strings.Contains(err.Error(), "opctl repair apply "+p.ID) {
		t.Fatalf("plan again: %v", err)
	}

	// reconcile --check skipped meets it.
	var got []reconcile.Result
	_, err = reconcile.Run(context.Background(), reconcile.Deps{DB: e.cl.Reader, Collector: e.svc.Collector},
		reconcile.Options{Pipelines: []*config.Pipeline{e.cfg.Pipeline("orders")}, Checks: []string{reconcile.CheckSkipped}, AllowFullScan: true},
		func(res reconcile.Result) error { got = append(got, res); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(got, func(res reconcile.Result) bool {
		return res.BizID == "8821" && res.Verdict == inspect.RepairIncomplete && res.IsTarget()
	}) {
		t.Fatalf("reconcile --check skipped: %+v", got)
	}

	// The plan is read back from the audit by its id (or a prefix of it).
	for _, id := range []string{p.ID, p.ID[:12]} {
		body, full, found, err := e.cl.Reader.PlanBody(context.Background(), e.cfg.Audit.AuditTable(), id)
		if err != nil || !found || full != p.ID {
			t.Fatalf("plan body %s: %v found %v id %s", id, err, found, full)
		}
		q, err := plans.Decode(bytes.NewReader(body))
		if err != nil || q.ID != p.ID || q.Verify() != nil {
			t.Fatalf("stored plan: %v %v", err, q)
		}
	}
	if _, _, found, err := e.cl.Reader.PlanBody(context.Background(), e.cfg.Audit.AuditTable(), strings.Repeat("f", 64)); found || err != nil {
		t.Fatalf("unknown plan: found %v err %v", found, err)
	}

	// Applying it again re-sends the record and finishes the plan.
	res = e.mustApply(p)
	if res.Outcome != OutcomeApplied || res.Previously != 1 || res.Actions[1].Outcome != OutcomePublished {
		t.Fatalf("finishing apply %+v", res)
	}
	r = e.where("orders", "8821")
	wantVerdict(t, r, inspect.WillRedeliver)
	if r.Repair != nil {
		t.Fatalf("repair view %+v after the plan finished", r.Repair)
	}
}
