package repair

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
)

// writePath is what an apply writes through, chosen once when it starts:
// Apply commits each action (committing, the configured publisher and
// poster, the audit mirror); DryRun rolls everything back at the end
// (dryStore, noSend, no mirror of actions). The executor never asks which
// one it has.
type writePath struct {
	st   store
	pub  Publisher
	post sources.Poster
	// mirror receives the audit rows of actions that took effect (nil in a
	// dry run); attempts the attempt rows (every apply's).
	mirror, attempts *Mirror
	// dryRun only labels the Result.
	dryRun bool
}

// missingSender says why act cannot run on this write path: a republish
// without a publisher (no Kafka configured), a compensate_remote without a
// poster. nil when it can.
func (w writePath) missingSender(act plans.Action) error {
	switch {
	case act.Type == plans.Republish && w.pub == nil:
		topic := ""
		if act.Publish != nil {
			topic = " to " + act.Publish.Topic
		}
		return fmt.Errorf("action %d (republish%s) needs Kafka, and no broker is configured: nothing was applied; set kafka.brokers in the configuration or pass --brokers, then apply the plan again", act.Index, topic)
	case act.Type == plans.Redrive && w.post == nil:
		return fmt.Errorf("action %d (redrive of step %s) needs an HTTP client for the POST, and this apply has none (the Applier's Poster is nil): nothing was applied; run it with opctl repair apply, which sets one", act.Index, act.Step)
	case act.Type == plans.CompensateRemote && w.post == nil:
		return fmt.Errorf("action %d (compensate_remote of step %s) needs an HTTP client for the POST, and this apply has none (the Applier's Poster is nil): nothing was applied; run it with opctl repair apply, which sets one", act.Index, act.Step)
	}
	return nil
}

// store is the executor's view of the write path: a sources.Store plus how
// an apply's outcomes are named and how it ends.
type store interface {
	sources.Store
	// took names the outcome of an action that took effect.
	took(o Outcome) Outcome
	// attempt is the attempt row as this path records it.
	attempt(a sources.Attempt) sources.Attempt
	// end is called after the last action took effect.
	end(ctx context.Context, x *applyRun) error
	// close is called when the apply returns, whatever happened.
	close()
}

// committing is a store whose transactions commit one by one.
type committing struct{ sources.Store }

func (committing) took(o Outcome) Outcome                    { return o }
func (committing) attempt(a sources.Attempt) sources.Attempt { return a }
func (committing) end(context.Context, *applyRun) error      { return nil }
func (committing) close()                                    {}

// dryStore is the dry-run decorator of a store (restic's SetDryRun): every
// transaction of the apply is one transaction on inner, never committed,
// rolled back when the apply returns, so later actions' guards see what
// earlier ones would have written and nothing stays. It needs no
// SAVEPOINT: an action that fails ends the apply, so nothing of it must be
// undone before the final rollback. Attempts are recorded for real, as
// dry_run.
type dryStore struct {
	inner  dryBase
	shared sources.Tx
	// broken is the error that may have ended the shared transaction on
	// the server. The executor never runs another statement after such an
	// error today (a failed action ends the apply), so this is a safety
	// net, kept on purpose: after a deadlock MySQL has rolled the
	// transaction back and the connection is in autocommit, where every
	// later write of the "dry" run would commit for real.
	broken error
}

// dryBase is what a dry run may use of the real store: a transaction that
// it never commits, the audit as it stands, the attempt row, the plan's
// lock and the server's read-only flags. Do, TouchAudit and ClaimAudit,
// which commit, are not in it: a dry run cannot reach them.
type dryBase interface {
	Begin(ctx context.Context) (sources.Tx, error)
	AuditDone(ctx context.Context, table, planID string) ([]sources.AuditDone, error)
	RecordAttempt(ctx context.Context, table string, a sources.Attempt) error
	Lock(ctx context.Context, name string, wait time.Duration) (sources.Lock, error)
	ReadOnly(ctx context.Context) ([]string, error)
}

// Do runs fn inside the shared transaction; it never commits.
func (d *dryStore) Do(ctx context.Context, fn func(sources.Tx) error) error {
	tx, err := d.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		// The server may have rolled the shared transaction back (a
		// deadlock): nothing after this may run in it. An action another
		// apply recorded first is not such an error: the apply goes on.
		var exists *sources.AuditExistsError
		if !errors.As(err, &exists) {
			d.broken = err
		}
		return err
	}
	return nil
}

// Begin returns the shared transaction, opening it on first use; its
// Commit and Rollback do nothing (close ends it).
func (d *dryStore) Begin(ctx context.Context) (sources.Tx, error) {
	if d.broken != nil {
		return nil, fmt.Errorf("dry run: an earlier statement failed: %w", d.broken)
	}
	if d.shared == nil {
		tx, err := d.inner.Begin(ctx)
		if err != nil {
			return nil, err
		}
		d.shared = tx
	}
	return sharedTx{d.shared}, nil
}

// AuditDone reads the audit on inner: it changes nothing.
func (d *dryStore) AuditDone(ctx context.Context, table, planID string) ([]sources.AuditDone, error) {
	return d.inner.AuditDone(ctx, table, planID)
}

// RecordAttempt records the attempt for real: every dry run is recorded.
func (d *dryStore) RecordAttempt(ctx context.Context, table string, a sources.Attempt) error {
	return d.inner.RecordAttempt(ctx, table, a)
}

// Lock takes the plan's lock on inner: a dry run is one apply too (its
// locking reads would otherwise wait on a real apply's rows, and tell
// what it sees half-way).
func (d *dryStore) Lock(ctx context.Context, name string, wait time.Duration) (sources.Lock, error) {
	return d.inner.Lock(ctx, name, wait)
}

// TouchAudit renews nothing: a dry run's rows in flight are in its
// rolled-back transaction, and it sends nothing.
func (d *dryStore) TouchAudit(context.Context, string, string, int, string, string) (bool, error) {
	return true, nil
}

// ClaimAudit takes nothing over: a dry run changes no row for real.
func (d *dryStore) ClaimAudit(context.Context, string, string, int, string, time.Time, json.RawMessage) (bool, error) {
	return true, nil
}

// ReadOnly reads the server: a dry run writes too (then rolls back).
func (d *dryStore) ReadOnly(ctx context.Context) ([]string, error) { return d.inner.ReadOnly(ctx) }

func (d *dryStore) took(o Outcome) Outcome {
	switch o {
	case OutcomeApplied, OutcomePublished, OutcomePublishing, OutcomeCompensating, OutcomeRedriving:
		return OutcomeWouldApply
	}
	return o
}

func (d *dryStore) attempt(a sources.Attempt) sources.Attempt {
	a.Outcome = AttemptDryRun
	return a
}

// end records the dry run's attempt with what it would have done.
func (d *dryStore) end(ctx context.Context, x *applyRun) error {
	return x.record(ctx, 0, AttemptDryRun, map[string]any{"actions": x.res.Actions})
}

// close rolls the shared transaction back.
func (d *dryStore) close() {
	if d.shared != nil {
		_ = d.shared.Rollback()
		d.shared = nil
	}
}

// sharedTx is the shared transaction of a dry run as one action sees it.
// Nothing in the executor commits or rolls back a Tx itself today (Do
// does), so these no-ops are a safety net, kept on purpose: a decorator of
// the store (like the failpoints' crashStore) or a future caller that ends the Tx it was
// given must not commit a dry run, nor end the shared transaction that
// later actions' guards read.
type sharedTx struct{ sources.Tx }

func (sharedTx) Commit() error   { return nil }
func (sharedTx) Rollback() error { return nil }

// noSend is the publisher and poster of a dry run: nothing is sent; what
// would have been is recorded (sent).
type noSend struct {
	mu   sync.Mutex
	sent []string
}

func (n *noSend) record(what string) {
	n.mu.Lock()
	n.sent = append(n.sent, what)
	n.mu.Unlock()
}

// Publish sends nothing and reports the planned partition, offset -1.
func (n *noSend) Publish(_ context.Context, topic string, partition int32, _, _ []byte, _ map[string]string) (int32, int64, error) {
	n.record(fmt.Sprintf("publish %s/%d", topic, partition))
	return partition, -1, nil
}

// LogEnd reads nothing: a dry run's record is never looked up (-1).
func (*noSend) LogEnd(context.Context, string, int32) (int64, error) { return -1, nil }

// FindPublished finds nothing: a dry run sent nothing.
func (*noSend) FindPublished(context.Context, string, int32, int64, map[string]string) (int64, bool, error) {
	return -1, false, nil
}

// Post sends nothing and answers as a downstream that accepted it.
func (n *noSend) Post(_ context.Context, url string, _ []byte, _ map[string]string) sources.PostResult {
	n.record("POST " + sources.RedactURL(url))
	return sources.PostResult{URL: sources.RedactURL(url), Answered: true, Status: 200, Detail: "dry run: not sent"}
}

// Mirror writes every audit row an apply records as one JSON line
// (config audit.file). It is safe for concurrent use; a nil *Mirror writes
// nothing.
type Mirror struct {
	mu sync.Mutex
	w  io.Writer
}

// NewMirror returns a mirror writing to w.
func NewMirror(w io.Writer) *Mirror { return &Mirror{w: w} }

// Action mirrors an audit row that took effect.
func (m *Mirror) Action(table string, e sources.AuditEntry) error {
	if m == nil {
		return nil
	}
	return m.write(map[string]any{"table": table, "plan_id": e.PlanID, "action_index": e.ActionIndex, "biz_id": e.BizID,
		"pipeline": e.Pipeline, "action": e.Action, "operator": e.Operator, "reason": e.Reason, "outcome": e.Outcome,
		"before_image": sources.JSONOrNull(e.Before), "after_image": sources.JSONOrNull(e.After)})
}

// Attempt mirrors an attempt row.
func (m *Mirror) Attempt(table string, a sources.Attempt) error {
	if m == nil {
		return nil
	}
	return m.write(map[string]any{"table": table, "plan_id": a.PlanID, "action_index": a.ActionIndex, "biz_id": a.BizID,
		"operator": a.Operator, "outcome": a.Outcome, "detail": sources.JSONOrNull(a.Detail)})
}

func (m *Mirror) write(row map[string]any) error {
	row["at"] = time.Now().UTC().Format(time.RFC3339Nano)
	b, err := json.Marshal(row)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("audit.file: %w", err)
	}
	return nil
}
