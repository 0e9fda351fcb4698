package sources

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/opctl-dev/opctl/sources/config"
)

// Store is the write path of a repair (mysql.write_dsn; sources/mysql.Writer
// implements it). Every action of a plan runs in one transaction together
// with the locking reads of its guards and its audit row (docs/repair.md).
type Store interface {
	// Do runs fn in one transaction and commits it when fn returns nil. When
	// the server rolls the transaction back for a deadlock or a lock wait
	// timeout, Do runs fn again in a new one (fn must not keep what it read
	// from an earlier run); any other error of fn rolls back and is returned.
	Do(ctx context.Context, fn func(Tx) error) error
	// Begin starts a transaction that the caller ends (a dry run keeps one
	// open for a whole apply and rolls it back).
	Begin(ctx context.Context) (Tx, error)
	// AuditDone lists the audit rows already recorded for plan planID (a
	// crash, or a second apply), outside any transaction.
	AuditDone(ctx context.Context, auditTable, planID string) ([]AuditDone, error)
	// RecordAttempt writes one row of the attempt table: an apply that
	// changed nothing (dry_run, guard_failed, stale, error).
	RecordAttempt(ctx context.Context, attemptTable string, a Attempt) error

	// Lock takes the named lock (at most MaxLockName bytes) on a
	// connection of its own, waiting at most wait for another holder to
	// release it: one apply of a plan, one run of a runbook at a time,
	// across processes and machines. A lock another process still holds
	// after wait is a *LockHeldError naming it.
	Lock(ctx context.Context, name string, wait time.Duration) (Lock, error)
	// TouchAudit renews the lease of an action in flight: the audit row of
	// planID/index with outcome, whose after_image names owner, gets
	// updated_at = NOW(6). false when the row is no longer that owner's in
	// that outcome (another apply settled it).
	TouchAudit(ctx context.Context, auditTable, planID string, index int, outcome, owner string) (bool, error)
	// ClaimAudit makes an action in flight this apply's: the row of
	// planID/index with outcome, still last updated at seen (nobody renewed
	// it since it was read), gets after_image after and updated_at NOW(6).
	// false when the row changed.
	ClaimAudit(ctx context.Context, auditTable, planID string, index int, outcome string, seen time.Time, after json.RawMessage) (bool, error)
	// ReadOnly lists the server's read-only variables that are ON
	// (read_only, super_read_only, innodb_read_only; those the server does
	// not have are left out): a write path on a replica.
	ReadOnly(ctx context.Context) ([]string, error)
}

// Tx is one transaction of a repair: locking reads (SELECT ... FOR UPDATE)
// of what an action's guards check, the action's writes and its audit row.
// Every value is bound; identifiers come from the configuration only.
type Tx interface {
	// LockState reads the state row of bizID FOR UPDATE together with the
	// database clock (NOW(6)) of the same statement. A missing row is a
	// StateRow with Found false (and a zero clock).
	LockState(ctx context.Context, p *config.Pipeline, bizID string) (StateRow, time.Time, error)
	// LockIdempotency reads the action of the idempotency record key of
	// bizID FOR UPDATE; found is false when there is no such record.
	LockIdempotency(ctx context.Context, p *config.Pipeline, key, bizID string) (action string, found bool, err error)
	// LockRows runs a configured SELECT (a step's evidence) with bizID
	// bound, FOR UPDATE (without it when the server cannot lock that
	// statement, e.g. a UNION), reading at most MaxLockedRows rows.
	LockRows(ctx context.Context, query, bizID string) (LockedRows, error)
	// LockIntents runs a step's intent query like LockRows and maps its
	// rows as the read path does (request_id, sent_at, acked_at, result).
	LockIntents(ctx context.Context, query, bizID string) ([]Intent, error)
	// LockEntity runs the entity query like LockRows; its first row's first
	// column is the status.
	LockEntity(ctx context.Context, query, bizID string) (EntityRow, error)
	// LockAudit reads opctl's audit actions of the operation FOR UPDATE
	// (all outcomes), parsed as the read path parses them.
	LockAudit(ctx context.Context, auditTable, pipeline, bizID string) ([]AuditAction, error)

	// WriteState inserts or updates the state row (StateWrite says how)
	// and returns the statement with the rows it changed; the caller checks
	// that the CAS changed exactly one.
	WriteState(ctx context.Context, p *config.Pipeline, bizID string, w StateWrite) (Statement, error)
	// FlipIdempotency sets the action of record key of bizID from → to,
	// under a CAS on from; an empty to deletes the record (idempotency.reopen:
	// delete), under the same CAS. A table without a biz_id column names the
	// record by its key alone.
	FlipIdempotency(ctx context.Context, p *config.Pipeline, key, bizID, from, to string) (Statement, error)
	// LockRecord reads the whole idempotency record key of bizID FOR
	// UPDATE (every column): the image the audit keeps of a record opctl
	// deletes. found is false when there is none.
	LockRecord(ctx context.Context, p *config.Pipeline, key, bizID string) (row Row, found bool, err error)
	// Reverse runs one configured reverse statement, binding :biz_id to
	// bizID and every other :name from row i of rows (a DECIMAL exactly). A
	// :name that rows does not have is an error and runs nothing.
	Reverse(ctx context.Context, stmt, bizID string, rows LockedRows, i int) (Statement, error)

	// InsertAudit writes an action's audit row. A row for the same
	// (plan_id, action_index) is an *AuditExistsError: another apply of the
	// plan recorded the action first.
	InsertAudit(ctx context.Context, auditTable string, e AuditEntry) error
	// SetAuditOutcome moves an action's audit row from outcome from to to
	// (publishing → published, compensating → applied) and replaces its
	// after_image; a row that is no longer from is an error.
	SetAuditOutcome(ctx context.Context, auditTable, planID string, index int, from, to string, after json.RawMessage) error
	// DeleteAudit removes an action's audit row that still has outcome
	// (a compensation the downstream refused: nothing took effect).
	DeleteAudit(ctx context.Context, auditTable, planID string, index int, outcome string) error

	Commit() error
	Rollback() error
}

// MaxLockedRows bounds the rows a repair reads from one query.
const MaxLockedRows = 1000

// LockedRows are the rows of a configured query read in a repair's
// transaction, with values converted exactly as the read path converts
// them (see Value).
type LockedRows struct {
	Columns []string
	// Decimal[j] is true when column j is a DECIMAL: its values are the
	// server's text, bound back exactly.
	Decimal []bool
	Values  [][]Value
}

// Row returns row i as a Row.
func (lr LockedRows) Row(i int) Row { return Row{Columns: lr.Columns, Values: lr.Values[i]} }

// StateWrite is one write of the state row by a repair. Every write
// increments the version column (when configured) and sets updated_at to
// the database's NOW(3); an update is a CAS on the version read (or, without
// a version column, on the status read).
type StateWrite struct {
	// Insert creates the row: key, Status, version 1, MsgID, Partition and
	// Offset when known, created_at and updated_at NOW(3).
	Insert bool
	// Status is the new status (unused by a lease release).
	Status string
	// Release clears owner and lease_until instead of writing a status,
	// under a CAS on Owner too.
	Release bool
	Owner   string
	// Version and FromStatus are what the CAS compares with: the version
	// when the pipeline has a version column and it was read, else the
	// status.
	Version    *int64
	FromStatus string
	MsgID      string
	Partition  *int32
	Offset     *int64
}

// Statement is one SQL statement a repair ran, with the rows it changed
// (inside the rolled-back transaction, in a dry run).
type Statement struct {
	SQL  string `json:"sql"`
	Rows int64  `json:"rows"`
}

// AuditEntry is one row of the audit table: an action that took effect (or
// is under way: publishing, compensating).
type AuditEntry struct {
	PlanID      string
	ActionIndex int
	BizID       string
	Pipeline    string
	Action      string
	Operator    string
	Reason      string
	Outcome     string
	Before      json.RawMessage
	After       json.RawMessage
}

// AuditDone is what the audit says of one action of a plan.
type AuditDone struct {
	ActionIndex int
	Outcome     string
	// BizID and Pipeline are the operation the row was recorded for.
	BizID    string
	Pipeline string
	// UpdatedAt is when the row was written or its lease last renewed, Now
	// the database clock of the same read: they decide whether an action
	// left in flight (publishing, compensating) may still be under way.
	UpdatedAt time.Time
	Now       time.Time
	// After is the after_image of a row in flight (its owner, lease and
	// what its effect can be looked up by); nil for a row that took
	// effect.
	After json.RawMessage
}

// Attempt is one row of the attempt table: an apply that changed nothing.
type Attempt struct {
	PlanID      string
	ActionIndex int
	BizID       string
	Operator    string
	// Outcome is dry_run, guard_failed, stale or error.
	Outcome string
	Detail  json.RawMessage
}

// AuditExistsError is returned by Tx.InsertAudit when the audit already has
// the action: another apply of the same plan recorded it first (the
// table's UNIQUE (plan_id, action_index)).
type AuditExistsError struct {
	PlanID      string
	ActionIndex int
}

// Error names the action.
func (e *AuditExistsError) Error() string {
	return fmt.Sprintf("action %d of plan %.12s is already in the audit", e.ActionIndex, e.PlanID)
}

// NoAuditTableError says that an audit table does not exist.
type NoAuditTableError struct {
	Table string
}

// Error says how to create it.
func (e *NoAuditTableError) Error() string {
	return fmt.Sprintf("the audit table %s does not exist: create it with 'opctl schema apply --audit'", e.Table)
}

// AuditFilter selects audit rows for `opctl audit`. Empty fields do not
// filter.
type AuditFilter struct {
	BizID string
	// PlanID is a plan id or a prefix of one.
	PlanID   string
	Pipeline string
	// Limit bounds the rows read from each table (default 100).
	Limit int
}

// AuditRow is one row of the audit table.
type AuditRow struct {
	ID          int64           `json:"id"`
	PlanID      string          `json:"plan_id"`
	ActionIndex int             `json:"action_index"`
	BizID       string          `json:"biz_id"`
	Pipeline    string          `json:"pipeline"`
	Action      string          `json:"action"`
	Operator    string          `json:"operator"`
	Reason      string          `json:"reason"`
	Outcome     string          `json:"outcome"`
	BeforeImage json.RawMessage `json:"before_image"`
	AfterImage  json.RawMessage `json:"after_image"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
}

// AttemptRow is one row of the attempt table.
type AttemptRow struct {
	ID          int64           `json:"id"`
	PlanID      string          `json:"plan_id"`
	ActionIndex int             `json:"action_index"`
	BizID       string          `json:"biz_id"`
	Operator    string          `json:"operator"`
	Outcome     string          `json:"outcome"`
	Detail      json.RawMessage `json:"detail"`
	CreatedAt   time.Time       `json:"created_at"`
}

// AuditLog is what `opctl audit` reads, oldest first in each list.
type AuditLog struct {
	Actions  []AuditRow   `json:"actions"`
	Attempts []AttemptRow `json:"attempts"`
}

// The audit's vocabulary, as written by repairs and read back by `opctl
// where` (docs/repair.md). repair/plans' action types and repair's
// outcomes are these values.
const (
	// Outcomes of an audit row.
	AuditApplied      = "applied"
	AuditPublishing   = "publishing"
	AuditPublished    = "published"
	AuditCompensating = "compensating"
	// AuditRedriving: a redrive's POST is under way (docs/repair.md).
	AuditRedriving = "redriving"

	// Actions of an audit row.
	AuditAdvanceState     = "advance_state"
	AuditRewindState      = "rewind_state"
	AuditRepublish        = "republish"
	AuditFlipSkipped      = "flip_skipped"
	AuditReverse          = "reverse"
	AuditCompensateRemote = "compensate_remote"
	AuditRedrive          = "redrive"
	AuditReleaseLease     = "release_lease"
	AuditManual           = "manual"
)

// MaxOperator is the longest operator name the audit keeps, in bytes
// (operator VARCHAR(128), docs/repair.md): `repair plan` refuses a longer
// --operator, and the store clips a longer applier's name at a UTF-8
// character boundary.
const MaxOperator = 128

// JSONOrNull is raw, or the JSON null when raw is empty: how the audit's
// JSON columns (before_image, after_image, detail) and their audit.file
// mirror write a value that is not set (docs/repair.md).
func JSONOrNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}
