package mysql

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// queryKind says what one statement of a read is for.
type queryKind int

const (
	kindState queryKind = iota // state row + NOW(6), or NOW(6) alone
	kindEvidence
	kindIntent
	kindIdempotency
	kindEntity
	kindAudit
)

// query is one statement of a read.
type query struct {
	kind queryKind
	step int // index into p.Steps for evidence and intent queries
	text string
	args []any
	// stateCols are the configured state columns selected after NOW(6), in
	// order (kindState only).
	stateCols []stateCol
	// order lists the 1-based positions of the selected columns that the
	// statement orders its rows by (nil: the order is the server's), so
	// that a batched read can keep each operation's rows in that order.
	order []int
	// branch, for opctl's own queries, is the same read as one branch of a
	// batched read: "SELECT ? AS opctl_op, <the same columns> FROM ... WHERE
	// ..." (the operation's ordinal, then args), with no ORDER BY or LIMIT
	// of its own (the batch orders by order, and keeps MaxRows rows per
	// operation): cheaper for the server than the text as a derived table.
	branch string
	// clock is, for the state query, the branch that yields the database
	// clock with every state column NULL, for the operations without a row
	// (ordinal -1).
	clock string
	// keyed, for opctl's own queries, is the same read for every operation
	// of a batch at once, joined with the batch's keys (keyedFrom): its
	// first ? is the keys, then the args after the biz_id; its first column
	// the operation's ordinal (keyedOp). ReadOperations makes a configured
	// query's, once a batch (keyedSnippet).
	keyed string
	// lookup says that the keyed form reads one table by its key and
	// nothing else (opctl's own queries; a configured query that
	// config.PlainLookup accepts), so that it costs the server per key what
	// the query costs for one: ReadOperationsHybrid reads such a query
	// with one statement per batch, any other once per operation.
	lookup bool
	// sortLast says that the batched forms (keyed, UNION ALL) have no
	// ORDER BY and each operation's rows are sorted by their last column,
	// a unique integer, once split (split): the audit's. Ordered by the
	// server, the batch's rows went through a temporary table, an on-disk
	// (Aria) one because after_image is a BLOB, and MariaDB 10.11.19 once
	// crashed (signal 11, in ha_maria::drop_table as the statement freed
	// it) on the keyed audit read; sorted here, the statement needs none.
	sortLast bool
}

// The keyed form of a batched read: the batch's keys as a JSON array bound
// to one ?, a row per key numbered from 1, each key compared as the bound
// biz_id would be (JSON_UNQUOTE of a JSON value is a coercible string, as a
// bound one is, so the column's own collation decides: Reader.keyedOK
// checks that the server agrees).
const (
	keyedFrom = "JSON_TABLE(?, '$[*]' COLUMNS (opctl_n FOR ORDINALITY, opctl_k JSON PATH '$')) AS opctl_ids"
	keyedKey  = "JSON_UNQUOTE(opctl_ids.opctl_k)"
	keyedOp   = "opctl_ids.opctl_n - 1 AS opctl_op"
)

// keyedSnippet is the keyed form of a configured query, or "".
func keyedSnippet(text string) string {
	k, ok := config.CutKeyedSelect(text)
	if !ok {
		return ""
	}
	var b strings.Builder
	b.WriteString(text[:k.AfterSelect])
	b.WriteString(" " + keyedOp + ",")
	at := k.AfterSelect
	cut := func(to int, insert string, skip int) {
		b.WriteString(text[at:to])
		b.WriteString(insert)
		at = to + skip
	}
	if k.Placeholder < k.AfterFrom {
		cut(k.Placeholder, keyedKey, 1)
		cut(k.AfterFrom, " "+keyedFrom+",", 0)
	} else {
		cut(k.AfterFrom, " "+keyedFrom+",", 0)
		cut(k.Placeholder, keyedKey, 1)
	}
	b.WriteString(text[at:])
	return b.String()
}

// stateCol is one selected column of the state row.
type stateCol int

const (
	colKey stateCol = iota
	colStatus
	colVersion
	colOwner
	colLeaseUntil
	colPartition
	colOffset
	colMsgID
	colCreatedAt
	colUpdatedAt
)

var stateColNames = [...]string{"key", "status", "version", "owner", "lease_until", "partition", "offset", "msg_id", "created_at", "updated_at"}

// ReadOperation reads everything MySQL holds about one operation of pipeline
// p: the state row together with the database clock (NOW(6)), each step's
// evidence rows and intents, the idempotency records, the entity status and
// opctl's audit actions from auditTable ("" skips the audit). All statements
// are issued at once, each on its own pooled connection, and the read waits
// for all of them (it respects ctx and leaves no goroutine behind). Each
// query reads at most MaxRows rows.
//
// Errors:
//   - a failing step query is recorded in that step's Err ("debit: evidence
//     query: ...") and does not fail the read;
//   - a missing audit table (error 1146) means no audit rows, not an error;
//   - a failing state, idempotency, entity or audit query yields a
//     *PartialError together with everything else that was read (when the
//     state query failed, Now is zero: the clock is read with it);
//   - when no statement could run at all (server unreachable, login refused,
//     deadline) the error is a *ConnError naming the address, never the
//     password;
//   - an identifier in p that is not valid (config.ValidIdent) is a plain
//     error and nothing is read.
func (r *Reader) ReadOperation(ctx context.Context, p *config.Pipeline, auditTable string, bizID string) (sources.DBEvidence, error) {
	start := time.Now()
	if p == nil {
		return sources.DBEvidence{}, errors.New("mysql: ReadOperation: nil pipeline")
	}
	qs, err := buildQueries(p, auditTable, bizID)
	if err != nil {
		return sources.DBEvidence{}, err
	}

	results := make([]result, len(qs))
	var wg sync.WaitGroup
	for i := range qs {
		wg.Go(func() { results[i] = r.fetchQuery(ctx, qs[i]) })
	}
	wg.Wait()

	// Every statement ran in its own goroutine, none waiting for another's
	// result: the only sequencing is the pool, which runs at most
	// maxOpenConns statements at a time.
	stats := ReadStats{
		Statements:   len(qs),
		CriticalPath: (len(qs) + maxOpenConns - 1) / maxOpenConns,
		Elapsed:      time.Since(start),
		Failed:       failures(results),
	}
	r.mu.Lock()
	r.stats = stats
	r.mu.Unlock()
	return r.assemble(p, qs, results)
}

// fetchQuery runs q with its own arguments. An id the key column's
// character set cannot hold matches no row (unholdable): q then answers as
// it would for an id that is not there: no row, and for the state query
// its one row with the clock and no state (q.clock).
func (r *Reader) fetchQuery(ctx context.Context, q query) result {
	return r.fetchQueryOn(ctx, nil, q)
}

// fetchQueryOn is fetchQuery on conn, one connection of the pool, when
// not nil (a snapshot read's: snapshot.go); on the pool otherwise.
func (r *Reader) fetchQueryOn(ctx context.Context, conn *sql.Conn, q query) result {
	res := r.fetchOn(ctx, conn, q.text, q.limit(), q.args...)
	if res.err == nil || !unholdable(res.err, q.args) {
		return res
	}
	if q.kind != kindState || q.clock == "" {
		// The columns of an answer with no row: the same statement with
		// '' for the value the column cannot hold, no row read.
		args := make([]any, len(q.args))
		for i, a := range q.args {
			if s, ok := a.(string); ok && !isASCII(s) {
				a = ""
			}
			args[i] = a
		}
		shape := r.fetchOn(ctx, conn, q.text, 0, args...)
		shape.rows = nil
		return shape
	}
	clock := r.fetchOn(ctx, conn, q.clock, 1)
	if clock.err != nil || len(clock.cols) == 0 {
		return clock
	}
	// The clock branch's first column is the batch's ordinal.
	out := result{cols: clock.cols[1:], types: clock.types[1:]}
	for _, row := range clock.rows {
		out.rows = append(out.rows, row[1:])
	}
	return out
}

// limit is the number of rows read from q's statement.
func (q query) limit() int {
	if q.kind == kindEntity {
		return 1 // only the first row's status is used
	}
	return MaxRows
}

// failures counts the statements that returned an error.
func failures(results []result) int {
	n := 0
	for _, res := range results {
		if res.err != nil {
			n++
		}
	}
	return n
}

// assemble turns the results of one operation's statements (qs[i] gave
// results[i]) into its evidence, with the errors ReadOperation documents.
func (r *Reader) assemble(p *config.Pipeline, qs []query, results []result) (sources.DBEvidence, error) {
	answered := false
	var connErr error
	for i, res := range results {
		switch {
		case res.err == nil:
			answered = true
		case qs[i].kind == kindAudit && isNoTable(res.err):
			answered = true
		case isConnError(res.err):
			if connErr == nil {
				connErr = res.err
			}
		default:
			answered = true
		}
	}
	if !answered && connErr != nil {
		return sources.DBEvidence{}, r.connError(connErr)
	}

	ev := sources.DBEvidence{Steps: make([]sources.StepEvidence, len(p.Steps))}
	for i, s := range p.Steps {
		ev.Steps[i].Name = s.Name
	}
	var failed []QueryError
	fail := func(name string, err error) {
		failed = append(failed, QueryError{Query: name, Err: r.scrubErr(err)})
	}
	stepErr := func(i int, what string, err error) {
		msg := fmt.Sprintf("%s: %s query: %s", p.Steps[i].Name, what, scrub(err.Error(), r.passwd))
		if ev.Steps[i].Err != "" {
			ev.Steps[i].Err += "; " + msg
		} else {
			ev.Steps[i].Err = msg
		}
	}

	for i, q := range qs {
		res := results[i]
		switch q.kind {
		case kindState:
			if res.err != nil {
				fail("state", res.err)
				continue
			}
			if err := readState(&ev, q.stateCols, res); err != nil {
				fail("state", err)
			}
		case kindEvidence:
			if res.err != nil {
				stepErr(q.step, "evidence", res.err)
				continue
			}
			rows := make([]sources.Row, len(res.rows))
			for j, vals := range res.rows {
				rows[j] = sources.Row{Columns: res.cols, Values: vals}
			}
			ev.Steps[q.step].Rows = rows
		case kindIntent:
			if res.err != nil {
				stepErr(q.step, "intent", res.err)
				continue
			}
			intents, err := readIntents(res)
			if err != nil {
				stepErr(q.step, "intent", err)
				continue
			}
			ev.Steps[q.step].Intents = intents
		case kindIdempotency:
			if res.err != nil {
				fail("idempotency", res.err)
				continue
			}
			ev.Idempotency = readIdempotency(res)
		case kindEntity:
			if res.err != nil {
				fail("entity", res.err)
				continue
			}
			ent := &sources.EntityRow{}
			if len(res.rows) > 0 && len(res.rows[0]) > 0 {
				ent.Found = true
				ent.Status = asString(res.rows[0][0])
				if len(res.rows[0]) > 1 {
					// A second column that is a time anchors the message
					// search (docs/config.md#entity).
					if t, ok := asTime(res.rows[0][1]); ok {
						ent.At = &t
					}
				}
			}
			ev.Entity = ent
		case kindAudit:
			if res.err != nil {
				if !isNoTable(res.err) {
					fail("audit", res.err)
				}
				continue
			}
			audit, err := readAudit(res)
			if err != nil {
				fail("audit", err)
			}
			ev.Audit = audit
		}
	}
	if len(failed) > 0 {
		return ev, &PartialError{Addr: r.addr, Failed: failed}
	}
	return ev, nil
}

// scrubErr makes sure an error kept for the caller does not carry the
// password in its message.
func (r *Reader) scrubErr(err error) error {
	if r.passwd == "" || !strings.Contains(err.Error(), r.passwd) {
		return err
	}
	return errors.New(scrub(err.Error(), r.passwd))
}

// buildQueries builds every statement of a read of p. Identifiers are
// checked with config.ValidIdent here, so that config.QuoteIdent never
// panics, and a pipeline built in code with a bad name is an error.
func buildQueries(p *config.Pipeline, auditTable, bizID string) ([]query, error) {
	var bad []string
	q := func(id string) string {
		if !config.ValidIdent(id) {
			bad = append(bad, fmt.Sprintf("%q", id))
			return ""
		}
		return config.QuoteIdent(id)
	}
	var qs []query

	if st := p.State; st != nil {
		sel, cols := stateSelect(st, q)
		text := fmt.Sprintf("SELECT %s FROM (SELECT 1 AS one) AS o LEFT JOIN %s AS s ON s.%s = ?", sel, q(st.Table), q(st.Key))
		branch := fmt.Sprintf("SELECT ? AS opctl_op, %s FROM %s AS s WHERE s.%s = ?", sel, q(st.Table), q(st.Key))
		// The clock branch selects the state columns from an empty join
		// rather than bare NULLs, so that every column of the UNION keeps
		// the table's type. go-mysql-server types DATETIME UNION ALL NULL
		// as text (the batch's times read as strings: every verdict
		// partial) and, on a table with a primary-key index, rejects the
		// bare-NULL form ("result max1Row iterator returned more than one
		// row": every batch fell back to one statement per operation).
		//
		// The join condition is the key compared with NULL, which no row
		// meets: MariaDB answers it with one index lookup, where ON 1 = 0
		// (or FALSE) made it read the whole table through an index in every
		// batch — a full pass over the state table per 256 candidates.
		clock := fmt.Sprintf("SELECT -1, %s FROM (SELECT 1 AS one) AS o LEFT JOIN %s AS s ON s.%s = NULL", sel, q(st.Table), q(st.Key))
		keyed := fmt.Sprintf("SELECT %s, %s FROM %s, %s AS s WHERE s.%s = %s", keyedOp, sel, keyedFrom, q(st.Table), q(st.Key), keyedKey)
		qs = append(qs, query{kind: kindState, text: text, args: []any{bizID}, stateCols: cols, branch: branch, clock: clock, keyed: keyed, lookup: true})
	} else {
		qs = append(qs, query{kind: kindState, text: "SELECT NOW(6)"})
	}

	for i, s := range p.Steps {
		// Evidence and intent queries are the operator team's SQL, run with
		// the biz_id bound to their one `?`.
		if s.Evidence != "" {
			qs = append(qs, query{kind: kindEvidence, step: i, text: s.Evidence, args: []any{bizID}, lookup: config.PlainLookup(s.Evidence)})
		}
		if s.Intent != "" {
			qs = append(qs, query{kind: kindIntent, step: i, text: s.Intent, args: []any{bizID}, lookup: config.PlainLookup(s.Intent)})
		}
	}

	if id := p.Idempotency; id != nil && id.BizID != "" {
		// Without a biz_id column the records are read by their keys, once
		// the operation's messages are found (ReadIdempotencyByKeys).
		sel := q(id.Key) + ", " + q(id.Action)
		order := q(id.Key)
		if id.CreatedAt != "" {
			sel += ", " + q(id.CreatedAt)
			order = q(id.CreatedAt) + ", " + order
		}
		// The stored biz_id, last: under a case- or accent-insensitive
		// collation it need not be the id typed (docs/repair.md "Keys").
		sel += ", " + q(id.BizID)
		from := fmt.Sprintf("FROM %s WHERE %s = ?", q(id.Table), q(id.BizID))
		text := fmt.Sprintf("SELECT %s %s ORDER BY %s LIMIT %d", sel, from, order, MaxRows)
		branch := fmt.Sprintf("SELECT ? AS opctl_op, %s %s", sel, from)
		pos := []int{1}
		if id.CreatedAt != "" {
			pos = []int{3, 1}
		}
		keyed := fmt.Sprintf("SELECT %s, %s FROM %s, %s WHERE %s = %s", keyedOp, sel, keyedFrom, q(id.Table), q(id.BizID), keyedKey)
		qs = append(qs, query{kind: kindIdempotency, text: text, args: []any{bizID}, order: pos, branch: branch, keyed: keyed, lookup: true})
	}

	if e := p.Entity; e != nil && e.Query != "" {
		qs = append(qs, query{kind: kindEntity, text: e.Query, args: []any{bizID}, lookup: config.PlainLookup(e.Query)})
	}

	if auditTable != "" {
		sel := auditSelect(q(auditTable))
		text := fmt.Sprintf("SELECT %s ORDER BY id LIMIT %d", sel, MaxRows)
		qs = append(qs, query{kind: kindAudit, text: text, args: []any{bizID, p.Name}, sortLast: true, lookup: true,
			branch: "SELECT ? AS opctl_op, " + sel,
			keyed:  fmt.Sprintf("SELECT %s, %s FROM %s, %s WHERE biz_id = %s AND pipeline = ?", keyedOp, auditCols, keyedFrom, q(auditTable), keyedKey)})
	}

	if len(bad) > 0 {
		return nil, fmt.Errorf("mysql: pipeline %q: invalid identifier(s) %s", p.Name, strings.Join(bad, ", "))
	}
	return qs, nil
}

// auditSelect is the select list, FROM and WHERE of a read of one
// operation's audit actions in the quoted table (biz_id and pipeline bound),
// in the column order readAudit reads by position; id is selected last,
// only to order a batched read by it. The read path and the locking read
// of the guards share it.
func auditSelect(table string) string {
	return auditCols + " FROM " + table + " WHERE biz_id = ? AND pipeline = ?"
}

// auditCols are the columns auditSelect selects.
const auditCols = "plan_id, action_index, action, outcome, after_image, created_at, id"

// stateSelect is the select list of a state read: NOW(6) AS c0, then each
// configured column of the state table (alias s) as c1, c2, ...; cols says
// which role each selected column has. Aliased, so that two roles on one
// column still make distinct column names.
func stateSelect(st *config.State, q func(string) string) (string, []stateCol) {
	cols := []stateCol{colKey, colStatus}
	names := []string{st.Key, st.Status}
	for _, o := range []struct {
		col  stateCol
		name string
	}{
		{colVersion, st.Version}, {colOwner, st.Owner}, {colLeaseUntil, st.LeaseUntil},
		{colPartition, st.Partition}, {colOffset, st.Offset}, {colMsgID, st.MsgID},
		{colCreatedAt, st.CreatedAt}, {colUpdatedAt, st.UpdatedAt},
	} {
		if o.name != "" {
			cols = append(cols, o.col)
			names = append(names, o.name)
		}
	}
	var sel strings.Builder
	sel.WriteString("NOW(6) AS c0")
	for i, n := range names {
		fmt.Fprintf(&sel, ", s.%s AS c%d", q(n), i+1)
	}
	return sel.String(), cols
}

// readState fills ev.Now and ev.State from the state statement's one row. A
// value of an unexpected type is not assumed: its field stays unset and the
// column is reported.
func readState(ev *sources.DBEvidence, cols []stateCol, res result) error {
	if len(res.rows) == 0 {
		return errors.New("no row (expected one)")
	}
	vals := res.rows[0]
	now, ok := asTime(vals[0])
	if !ok {
		return fmt.Errorf("NOW(6) returned %T", vals[0])
	}
	ev.Now = now
	st := &ev.State
	var bad []string
	for i, c := range cols {
		v := vals[i+1]
		if v == nil {
			continue
		}
		ok := true
		switch c {
		case colKey:
			st.Found = true
			st.Key = asString(v)
		case colStatus:
			st.Status = asString(v)
		case colOwner:
			st.Owner = asString(v)
		case colMsgID:
			st.MsgID = asString(v)
		case colVersion:
			st.Version, ok = intPtr(v)
		case colOffset:
			st.Offset, ok = intPtr(v)
		case colPartition:
			var n *int64
			if n, ok = intPtr(v); ok && *n >= 0 && *n <= math.MaxInt32 {
				p := int32(*n)
				st.Partition = &p
			} else {
				ok = false
			}
		case colLeaseUntil:
			st.LeaseUntil, ok = timePtr(v)
		case colCreatedAt:
			st.CreatedAt, ok = timePtr(v)
		case colUpdatedAt:
			st.UpdatedAt, ok = timePtr(v)
		}
		if !ok {
			bad = append(bad, fmt.Sprintf("%s column: unexpected value %v (%T)", stateColNames[c], v, v))
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

func intPtr(v sources.Value) (*int64, bool) {
	n, ok := asInt64(v)
	if !ok {
		return nil, false
	}
	return &n, true
}

func timePtr(v sources.Value) (*time.Time, bool) {
	t, ok := asTime(v)
	if !ok {
		return nil, false
	}
	return &t, true
}

// colIndex finds a column by name, case-insensitively; -1 when absent.
func colIndex(cols []string, name string) int {
	for i, c := range cols {
		if strings.EqualFold(c, name) {
			return i
		}
	}
	return -1
}

// readIntents maps intent rows by column name: request_id (required),
// sent_at, acked_at, result (optional).
func readIntents(res result) ([]sources.Intent, error) {
	ri := colIndex(res.cols, "request_id")
	if ri < 0 {
		return nil, fmt.Errorf("no request_id column (columns: %s)", strings.Join(res.cols, ", "))
	}
	si, ai, rsi := colIndex(res.cols, "sent_at"), colIndex(res.cols, "acked_at"), colIndex(res.cols, "result")
	timeAt := func(vals []sources.Value, i int, name string) (*time.Time, error) {
		if i < 0 || vals[i] == nil {
			return nil, nil
		}
		t, ok := asTime(vals[i])
		if !ok {
			return nil, fmt.Errorf("%s is %T, not a DATE/DATETIME/TIMESTAMP", name, vals[i])
		}
		return &t, nil
	}
	out := make([]sources.Intent, 0, len(res.rows))
	for _, vals := range res.rows {
		in := sources.Intent{RequestID: asString(vals[ri])}
		var err error
		if in.SentAt, err = timeAt(vals, si, "sent_at"); err != nil {
			return nil, err
		}
		if in.AckedAt, err = timeAt(vals, ai, "acked_at"); err != nil {
			return nil, err
		}
		if rsi >= 0 {
			in.Result = asString(vals[rsi])
		}
		out = append(out, in)
	}
	return out, nil
}

// readIdempotency maps (key, action[, created_at]) rows.
func readIdempotency(res result) []sources.IdempotencyRow {
	out := make([]sources.IdempotencyRow, 0, len(res.rows))
	for _, vals := range res.rows {
		row := sources.IdempotencyRow{Key: asString(vals[0]), Action: asString(vals[1])}
		if len(vals) > 3 {
			if t, ok := asTime(vals[2]); ok {
				row.CreatedAt = &t
			}
		}
		if len(vals) > 2 {
			row.BizID = asString(vals[len(vals)-1])
		}
		out = append(out, row)
	}
	return out
}

// afterImage is the part of an audit row's after_image that a read needs.
type afterImage struct {
	Step       string          `json:"step"`
	ReversedID json.RawMessage `json:"reversed_id"`
	Partition  json.RawMessage `json:"partition"`
	Offset     json.RawMessage `json:"offset"`
	Detail     json.RawMessage `json:"detail"`
	// PlanActions is how many actions the row's plan has.
	PlanActions *int `json:"plan_actions"`
	// Idempotency is what a flip_skipped did to its record; a deleted one
	// carries its whole row.
	Idempotency *struct {
		Key     string             `json:"key"`
		Deleted bool               `json:"deleted"`
		Columns []string           `json:"columns"`
		Row     map[string]*string `json:"row"`
	} `json:"idempotency"`
}

// readAudit maps audit rows. An after_image that cannot be parsed leaves the
// action without its details and is reported.
func readAudit(res result) ([]sources.AuditAction, error) {
	out := make([]sources.AuditAction, 0, len(res.rows))
	var bad []string
	for _, vals := range res.rows {
		a := sources.AuditAction{
			PlanID:  asString(vals[0]),
			Action:  asString(vals[2]),
			Outcome: asString(vals[3]),
		}
		if n, ok := asInt64(vals[1]); ok {
			a.ActionIndex = int(n)
		}
		if t, ok := asTime(vals[5]); ok {
			a.At = t
		}
		if img := asString(vals[4]); img != "" {
			var ai afterImage
			if err := json.Unmarshal([]byte(img), &ai); err != nil {
				bad = append(bad, fmt.Sprintf("plan %s action %d: after_image: %v", a.PlanID, a.ActionIndex, err))
			} else {
				a.Step = ai.Step
				a.ReversedID = jsonScalar(ai.ReversedID)
				if n, ok := asInt64(jsonScalar(ai.Partition)); ok && n >= 0 && n <= math.MaxInt32 {
					p := int32(n)
					a.Partition = &p
				}
				if n, ok := asInt64(jsonScalar(ai.Offset)); ok {
					a.Offset = &n
				}
				a.Detail = jsonScalar(ai.Detail)
				if ai.PlanActions != nil {
					a.PlanActions = *ai.PlanActions
				}
				if d := ai.Idempotency; d != nil && d.Deleted && len(d.Columns) > 0 {
					rec := &sources.DeletedRecord{Key: d.Key, Columns: d.Columns}
					for _, c := range d.Columns {
						rec.Values = append(rec.Values, d.Row[c])
					}
					a.Deleted = rec
				}
				a.Attested = attestedOf([]byte(img))
			}
		}
		out = append(out, a)
	}
	if len(bad) > 0 {
		return out, errors.New(strings.Join(bad, "; "))
	}
	return out, nil
}

// jsonScalar renders a JSON string as its text and a number (or any other
// value) as its JSON text; null or absent as "".
func jsonScalar(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// ReadIdempotencyByKeys reads the idempotency records of pipeline p whose
// key (idempotency.key, the msg id) is one of keys: how the records of a
// table without a biz_id column are linked to an operation, through the
// msg ids of its messages (docs/where.md#records-without-a-biz_id). At most
// MaxRows rows, in created_at (then key) order; no keys, no statement.
func (r *Reader) ReadIdempotencyByKeys(ctx context.Context, p *config.Pipeline, keys []string) ([]sources.IdempotencyRow, error) {
	id := p.Idempotency
	if id == nil || len(keys) == 0 {
		return nil, nil
	}
	for _, c := range []string{id.Table, id.Key, id.Action, id.CreatedAt} {
		if c != "" && !config.ValidIdent(c) {
			return nil, fmt.Errorf("mysql: pipeline %q: invalid identifier %q", p.Name, c)
		}
	}
	q := config.QuoteIdent
	sel := q(id.Key) + ", " + q(id.Action)
	order := q(id.Key)
	if id.CreatedAt != "" {
		sel += ", " + q(id.CreatedAt)
		order = q(id.CreatedAt) + ", " + order
	}
	// A constant last column keeps readIdempotency's layout (key, action[,
	// created_at], biz_id): the table has no biz_id.
	sel += ", ''"
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	text := fmt.Sprintf("SELECT %s FROM %s WHERE %s IN (%s) ORDER BY %s LIMIT %d", sel, q(id.Table), q(id.Key),
		strings.TrimSuffix(strings.Repeat("?,", len(keys)), ","), order, MaxRows)
	res := r.fetch(ctx, text, MaxRows, args...)
	if res.err != nil {
		if isConnError(res.err) {
			return nil, r.connError(res.err)
		}
		return nil, &PartialError{Addr: r.addr, Failed: []QueryError{{Query: sources.QueryIdempotency, Err: r.scrubErr(res.err)}}}
	}
	return readIdempotency(res), nil
}
