package sources

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/sources/config"
)

// Collector reads everything about one operation with the least waiting: the
// Kafka group view starts at once, in parallel with the MySQL queries (which
// run concurrently among themselves); the message search and the probes start
// as soon as the rows they need are in.
type Collector struct {
	DB DB
	// Kafka may be nil when no broker is configured; the report is then partial.
	Kafka Kafka
	// KafkaMissing says why Kafka is nil (shown in sources.kafka).
	KafkaMissing string
	Prober       Prober
	AuditTable   string
	// Timeout bounds each source (--timeout).
	Timeout time.Duration
	// SearchWindow and SearchLimit bound the message search (docs/where.md).
	SearchWindow time.Duration
	SearchLimit  int
	// Binlog reads the steps with a binlog block (nil: none configured, or
	// BinlogMissing says why not); BinlogSchema is the schema of a binlog
	// table named without one (the binlog DSN's database).
	Binlog        Binlog
	BinlogMissing string
	BinlogSchema  string
	// PerOperation makes CollectMany read each query whose plan for a list
	// of keys opctl cannot know with one statement per operation, as
	// Collect does, even when DB is a BatchDB: the watch's batches are a
	// few changed operations of a large table, where a batched statement's
	// plan may read the whole table (MariaDB turns a NOT EXISTS of an
	// evidence query into a scan of its index once per batch:
	// docs/watch.md#how-it-works). With a HybridDB the queries that look
	// their keys up in one table are still read once per batch (its
	// ReadOperationsHybrid); with any other DB every query is read per
	// operation. The group view is read once per batch either way.
	PerOperation bool
	// Snapshot makes Collect and CollectMany read each operation's MySQL
	// rows in one consistent snapshot (SnapshotDB.ReadOperationSnapshot,
	// one operation's statements one after another on one connection)
	// when DB is a SnapshotDB, at most manyReading operations at a time:
	// the watch's confirm of a target (docs/watch.md#how-it-works). A DB
	// that is not one is read as without it.
	Snapshot bool
	// Route, when set, gives a pipeline its own MySQL read path and binlog
	// reader (pipelines[].mysql: docs/config.md#pipelines); nil: DB and
	// Binlog serve every pipeline.
	Route func(p *config.Pipeline) Route
}

// Route is the MySQL read path and binlog reader of one pipeline.
type Route struct {
	DB            DB
	Binlog        Binlog
	BinlogMissing string
	BinlogSchema  string
}

// For is c as it reads pipeline p: with p's own MySQL and binlog when
// Route gives them.
func (c *Collector) For(p *config.Pipeline) *Collector {
	if c.Route == nil || p == nil {
		return c
	}
	rt := c.Route(p)
	if rt.DB == nil {
		return c
	}
	cc := *c
	cc.Route = nil
	cc.DB, cc.Binlog, cc.BinlogMissing, cc.BinlogSchema = rt.DB, rt.Binlog, rt.BinlogMissing, rt.BinlogSchema
	return &cc
}

// MaxBatch bounds the operations of one BatchDB.ReadOperations call: each
// batched statement binds one or two values per operation, and its rows
// are held until the statement ends.
const MaxBatch = 512

// ConnError is a connection-level failure of a source that nothing could be
// read from (MySQL down): the command fails with exit 1.
type ConnError struct{ Err error }

// Error is the reader's message (it names the server, never a password).
func (e *ConnError) Error() string { return e.Err.Error() }

// Unwrap returns the reader's error.
func (e *ConnError) Unwrap() error { return e.Err }

// IsConnError reports whether err is a connection-level failure: a
// *ConnError, or a driver's error that says it is one with a
// ConnectionLevel method (sources/mysql.ConnError), so that a caller
// above the drivers tells it apart without linking them.
func IsConnError(err error) bool {
	var ce *ConnError
	if errors.As(err, &ce) {
		return true
	}
	var cl interface{ ConnectionLevel() bool }
	return errors.As(err, &cl) && cl.ConnectionLevel()
}

// Collect reads the operation bizID of pipeline p. It returns a *ConnError
// wrapping the reader's error when MySQL cannot be reached at all; every other failure is recorded in
// Evidence.Sources and the evidence read so far is returned.
func (c *Collector) Collect(ctx context.Context, p *config.Pipeline, bizID string) (Evidence, error) {
	c = c.For(p)
	// 1. Kafka group view: needs nothing from MySQL, so it starts first.
	groupCh := make(chan groupResult, 1)
	if c.Kafka != nil {
		go func() { groupCh <- c.group(ctx, p) }()
	}

	// 2. MySQL: one concurrent round of queries.
	dctx, cancel := context.WithTimeout(ctx, c.timeout())
	db, err := c.readOne()(dctx, p, c.AuditTable, bizID)
	cancel()
	ev, err := newEvidence(p, bizID, db, err)
	if err != nil {
		return ev, err
	}

	// 3. Probes and the message search, concurrently.
	req, canLocate := c.locateRequest(p, ev.BizID, ev.DB)
	c.finish(ctx, &ev, func() groupResult { return <-groupCh }, req, canLocate, nil)
	return ev, nil
}

// BatchDB is a DB that can also read many operations of one pipeline with
// one statement per query (reconcile's triage). ReadOperations returns, for
// every bizIDs[i], what ReadOperation would: evs[i] and errs[i]; its error
// is for the whole batch (nothing could be read).
type BatchDB interface {
	DB
	ReadOperations(ctx context.Context, p *config.Pipeline, auditTable string, bizIDs []string) (evs []DBEvidence, errs []error, err error)
}

// HybridDB is a BatchDB that can also batch only the queries whose keyed
// form is a lookup of the keys in one table and read every other one per
// operation (Collector.PerOperation). ReadOperationsHybrid returns what
// ReadOperations does.
type HybridDB interface {
	BatchDB
	ReadOperationsHybrid(ctx context.Context, p *config.Pipeline, auditTable string, bizIDs []string) (evs []DBEvidence, errs []error, err error)
}

// CollectMany reads the operations bizIDs of pipeline p, as Collect reads
// one: evs[i] is what Collect(bizIDs[i]) returns. The Kafka group view is
// read once for all of them, and when the DB is a BatchDB the MySQL rows of
// all of them come from one statement per query (with PerOperation, only
// the lookups of a HybridDB); when the Kafka is a BatchLocator their
// messages are located by one LocateMany (within --timeout, as one
// Locate); the probes (and the message searches of a Kafka that is not)
// then run for every operation concurrently. The error is a *ConnError
// when MySQL cannot be reached at all.
func (c *Collector) CollectMany(ctx context.Context, p *config.Pipeline, bizIDs []string) ([]Evidence, error) {
	c = c.For(p)
	var gr groupResult
	var gwg sync.WaitGroup
	if c.Kafka != nil {
		gwg.Go(func() { gr = c.group(ctx, p) })
	}

	dbs := make([]DBEvidence, len(bizIDs))
	errs := make([]error, len(bizIDs))
	dctx, cancel := context.WithTimeout(ctx, c.timeout())
	b, batched := c.DB.(BatchDB)
	h, hybrid := c.DB.(HybridDB)
	readOne, snapshot := c.readOne(), c.snapshot()
	if !snapshot && (batched && !c.PerOperation || hybrid) {
		read := b.ReadOperations
		if c.PerOperation {
			read = h.ReadOperationsHybrid
		}
		var err error
		dbs, errs, err = read(dctx, p, c.AuditTable, bizIDs)
		if err != nil {
			cancel()
			gwg.Wait()
			return nil, &ConnError{Err: err}
		}
	} else {
		// At most manyReading operations at a time: each reads its
		// queries concurrently already.
		sem := make(chan struct{}, manyReading)
		var wg sync.WaitGroup
		for i, id := range bizIDs {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				dbs[i], errs[i] = readOne(dctx, p, c.AuditTable, id)
			})
		}
		wg.Wait()
	}
	cancel()

	evs := make([]Evidence, len(bizIDs))
	for i, id := range bizIDs {
		var err error
		if evs[i], err = newEvidence(p, id, dbs[i], errs[i]); err != nil {
			gwg.Wait()
			return nil, err
		}
	}
	waitGroup := func() groupResult { gwg.Wait(); return gr }
	reqs := make([]LocateRequest, len(evs))
	canLocate := make([]bool, len(evs))
	for i := range evs {
		reqs[i], canLocate[i] = c.locateRequest(p, evs[i].BizID, evs[i].DB)
	}
	located := c.locateMany(ctx, reqs, canLocate)
	// The probes call the downstream services: at most manyProbing
	// operations at a time.
	sem := make(chan struct{}, manyProbing)
	var wg sync.WaitGroup
	for i := range evs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c.finish(ctx, &evs[i], waitGroup, reqs[i], canLocate[i], located[i])
		})
	}
	wg.Wait()
	return evs, nil
}

// manyReading bounds the operations of a CollectMany whose MySQL rows are
// read one operation at a time (PerOperation with a DB that is no
// HybridDB, a DB that is no BatchDB, or Snapshot).
const manyReading = 8

// snapshot says whether c reads each operation in one consistent snapshot
// (Snapshot, with a SnapshotDB).
func (c *Collector) snapshot() bool {
	_, ok := c.DB.(SnapshotDB)
	return ok && c.Snapshot
}

// readOne is how c reads one operation's MySQL rows: in one snapshot
// (snapshot), else ReadOperation.
func (c *Collector) readOne() func(ctx context.Context, p *config.Pipeline, auditTable string, bizID string) (DBEvidence, error) {
	if s, ok := c.DB.(SnapshotDB); ok && c.Snapshot {
		return s.ReadOperationSnapshot
	}
	return c.DB.ReadOperation
}

// manyProbing bounds the operations of a CollectMany that probe and locate
// at once.
const manyProbing = 16

// locateMany locates the requests that can locate with LocateMany when
// the Kafka is a BatchLocator, and returns, for each of them, the wait for
// its answer (nil for the others, and for every request when the Kafka is
// not a BatchLocator: finish locates those one by one). The stored
// positions and the searches are two calls, concurrent: a read at stored
// positions takes a few round trips, and does not wait for a search that
// may take up to --timeout.
func (c *Collector) locateMany(ctx context.Context, reqs []LocateRequest, canLocate []bool) []func() (Location, error) {
	located := make([]func() (Location, error), len(reqs))
	bl, ok := c.Kafka.(BatchLocator)
	if !ok {
		return located
	}
	var stored, searched []int
	for i, req := range reqs {
		switch {
		case !canLocate[i]:
		case req.Partition >= 0 && req.Offset >= 0:
			stored = append(stored, i)
		default:
			searched = append(searched, i)
		}
	}
	for _, idx := range [][]int{stored, searched} {
		if len(idx) == 0 {
			continue
		}
		batch := make([]LocateRequest, len(idx))
		for j, i := range idx {
			batch[j] = reqs[i]
		}
		var locs []Location
		var errs []error
		done := make(chan struct{})
		go func() {
			defer close(done)
			kctx, cancel := context.WithTimeout(ctx, c.timeout())
			defer cancel()
			locs, errs = bl.LocateMany(kctx, batch)
		}()
		for j, i := range idx {
			located[i] = func() (Location, error) { <-done; return locs[j], errs[j] }
		}
	}
	return located
}

type groupResult struct {
	g   GroupView
	err error
}

func (c *Collector) group(ctx context.Context, p *config.Pipeline) groupResult {
	kctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	g, err := c.Kafka.Group(kctx, p.Topic, p.Group)
	return groupResult{g, err}
}

// newEvidence starts the evidence of one operation from its MySQL read: a
// partial read (an operation-level query that failed, in DB.Failed, or a
// step's, in its Err) is named in Sources["mysql"]; any other error is a
// *ConnError.
func newEvidence(p *config.Pipeline, bizID string, db DBEvidence, err error) (Evidence, error) {
	ev := Evidence{BizID: bizID, Pipeline: p, Sources: map[string]string{}}
	ev.Kafka.Partition, ev.Kafka.Offset, ev.Kafka.Located = -1, -1, LocatedUnknown
	var pe interface{ Partial() bool }
	if err != nil && (!errors.As(err, &pe) || !pe.Partial()) {
		return ev, &ConnError{Err: err}
	}
	if err != nil {
		db.Failed = failedQueries(err)
	}
	ev.Sources["mysql"] = MySQLStatus(db, err)
	ev.DB = db
	ev.BizID = StoredBizID(bizID, db)
	return ev, nil
}

// MySQLStatus is what Sources["mysql"] says of a read: StatusOK when every
// query answered, else every query that failed, by name ("mysql
// 127.0.0.1:3306: partial read: state query: ...; debit: evidence query:
// ..."), never an empty reason. partial is the reader's partial error (it
// names the operation-level queries and the server), nil when it returned
// none.
func MySQLStatus(db DBEvidence, partial error) string {
	var steps []string
	for _, s := range db.Steps {
		if s.Err != "" {
			steps = append(steps, s.Err)
		}
	}
	var parts []string
	switch {
	case partial != nil:
		parts = append(parts, partial.Error())
	case len(db.Failed) > 0:
		parts = append(parts, "partial read: "+db.Failed[0].String())
		for _, f := range db.Failed[1:] {
			parts = append(parts, f.String())
		}
	case len(steps) > 0:
		parts = append(parts, "partial read: "+steps[0])
		steps = steps[1:]
	default:
		return StatusOK
	}
	return strings.Join(append(parts, steps...), "; ")
}

// failedQueries names the operation-level queries a partial read error
// says failed (sources/mysql's *PartialError: Queries and Unwrap, in the
// same order); an error that does not say which is one failure of unknown
// query.
func failedQueries(err error) []FailedQuery {
	var named interface {
		Queries() []string
		Unwrap() []error
	}
	if errors.As(err, &named) {
		qs, errs := named.Queries(), named.Unwrap()
		if len(qs) > 0 && len(qs) == len(errs) {
			out := make([]FailedQuery, len(qs))
			for i := range qs {
				out[i] = FailedQuery{Query: qs[i], Err: errs[i].Error()}
			}
			return out
		}
	}
	return []FailedQuery{{Err: err.Error()}}
}

// StoredBizID is the operation's id as the database stores it: the state
// row's key, else the idempotency records' biz_id, when that names the
// operation typed under the table's collation but is not byte for byte
// what was typed (utf8mb4_general_ci finds PAY-1 for "pay-1", and "8821 "
// for "8821" under PAD SPACE). Everything opctl derives from the id — the
// message key it searches and republishes with, the partition, URLs, the
// audit — uses the stored one (docs/repair.md "Keys and partitions"). An
// id no stored row names is kept as typed.
func StoredBizID(typed string, db DBEvidence) string {
	if db.State.Found && db.State.Key != "" {
		return db.State.Key
	}
	stored := ""
	for _, r := range db.Idempotency {
		switch {
		case r.BizID == "":
		case stored == "":
			stored = r.BizID
		case stored != r.BizID:
			return typed // records that disagree: keep what was typed
		}
	}
	if stored != "" {
		return stored
	}
	return typed
}

// finish probes the unacked intents and locates the message (req, when
// canLocate), concurrently, then waits for the group view (group) and
// records the Kafka facts. located, when not nil, waits for the message's
// location read with others' (CollectMany's LocateMany) instead.
func (c *Collector) finish(ctx context.Context, ev *Evidence, group func() groupResult, req LocateRequest, canLocate bool, located func() (Location, error)) {
	p, bizID := ev.Pipeline, ev.BizID
	var wg sync.WaitGroup
	c.probe(ctx, &wg, p, bizID, ev)

	var loc Location
	var locErr error
	if c.Kafka != nil && canLocate {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if located != nil {
				loc, locErr = located()
				return
			}
			kctx, cancel := context.WithTimeout(ctx, c.timeout())
			defer cancel()
			loc, locErr = c.Kafka.Locate(kctx, req)
		}()
	}
	var gr groupResult
	if c.Kafka != nil {
		gr = group()
	}
	wg.Wait()
	// The binlog window is read once the message is in: its key and delta
	// come from it.
	defer c.readBinlog(ctx, ev)

	if c.Kafka == nil {
		ev.Sources["kafka"] = c.KafkaMissing
		if ev.Sources["kafka"] == "" {
			ev.Sources["kafka"] = "not configured"
		}
		return
	}
	// Each part of the Kafka view is kept when it was read, whatever
	// failed beside it: the group view (whole, or partly with its Unknown
	// fields named), and the message's position (docs/where.md "When a
	// Kafka request fails"). Anything unread makes sources.kafka say what.
	var failed []string
	var pe *PartialKafkaError
	switch {
	case gr.err == nil:
		ev.Kafka.Group = gr.g
	case errors.As(gr.err, &pe):
		ev.Kafka.Group = gr.g
		failed = append(failed, gr.err.Error())
	default:
		failed = append(failed, gr.err.Error())
	}
	switch {
	case locErr != nil:
		failed = append(failed, locErr.Error())
	case canLocate:
		ev.Kafka.Partition, ev.Kafka.Offset, ev.Kafka.Located = loc.Partition, loc.Offset, loc.Located
		ev.Kafka.Message, ev.Kafka.SearchDetail = loc.Message, loc.Detail
		if req.Newest && loc.Located != LocatedStored {
			ev.Kafka.SearchDetail = "no row anchors the search: by key, anchored at now; " + loc.Detail
		}
	default:
		ev.Kafka.SearchDetail = "no row to locate the message from"
	}
	ev.Sources["kafka"] = StatusOK
	if len(failed) > 0 {
		ev.Sources["kafka"] = strings.Join(failed, "; ")
	}
	if req.All {
		c.linkRecords(ctx, ev, loc.Messages)
	}
}

// linkRecords reads the idempotency records of an operation whose
// idempotency table has no biz_id column, through its messages (every
// record of its key in the search window): their msg ids, from the msg_id
// header or idempotency.msg_id_path, are the records' keys
// (docs/where.md#records-without-a-biz_id). The operation's message is then
// the one of the record MessageRecord picks (a SKIPPED decision is what an
// operator asks about), else the newest. A failed read is a failed
// idempotency query: the report is partial.
func (c *Collector) linkRecords(ctx context.Context, ev *Evidence, msgs []*Message) {
	p := ev.Pipeline
	byID := map[string]*Message{}
	var ids []string
	for _, m := range msgs {
		id := MsgIDOf(p, m)
		if id == "" || byID[id] != nil {
			continue
		}
		byID[id] = m
		ids = append(ids, id)
	}
	if len(msgs) > 0 {
		newest := msgs[len(msgs)-1]
		ev.Kafka.Offset, ev.Kafka.Message = newest.Offset, newest
	}
	rd, ok := c.DB.(IdempotencyByKeys)
	if len(ids) == 0 || !ok {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, c.timeout())
	rows, err := rd.ReadIdempotencyByKeys(dctx, p, ids)
	cancel()
	if err != nil {
		ev.DB.Failed = append(ev.DB.Failed, failedQueries(err)...)
		ev.Sources["mysql"] = MySQLStatus(ev.DB, err)
		return
	}
	ev.DB.Idempotency = rows
	if rec := MessageRecord(rows); rec != nil && byID[rec.Key] != nil {
		m := byID[rec.Key]
		ev.Kafka.Offset, ev.Kafka.Message = m.Offset, m
	}
}

// MsgIDOf is a message's msg id: its msg_id header, else the value at
// idempotency.msg_id_path of its JSON value; "" when neither gives one.
func MsgIDOf(p *config.Pipeline, m *Message) string {
	if v, ok := m.Headers["msg_id"]; ok && v != "" {
		return v
	}
	if p.Idempotency == nil || p.Idempotency.MsgIDPath == "" {
		return ""
	}
	mp, problem := config.ParseMessagePath(p.Idempotency.MsgIDPath, false)
	if problem != "" {
		return ""
	}
	v, err := mp.Lookup(m.Value)
	if err != nil {
		return ""
	}
	return v
}

func (c *Collector) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// UnanchoredWindow is how far back the message of an operation that no row
// anchors is searched (a pipeline without state and idempotency tables):
// the horizon of a binlog step's scan (config.MaxBinlogWindow), within
// --search-limit records (docs/where.md "Finding the message").
const UnanchoredWindow = config.MaxBinlogWindow

// locateRequest builds the message search from the rows read: the stored
// position and msg_id of the state row, else the idempotency record of
// interest; the earliest known timestamp of the operation.
func (c *Collector) locateRequest(p *config.Pipeline, bizID string, db DBEvidence) (LocateRequest, bool) {
	req := LocateRequest{Topic: p.Topic, Partitioner: p.Partitioner, Partition: -1, Offset: -1,
		Window: c.SearchWindow, Limit: c.SearchLimit}
	if req.Window == 0 {
		req.Window = DefaultSearchWindow
	}
	if req.Limit == 0 {
		req.Limit = DefaultSearchLimit
	}
	st := db.State
	var around *time.Time
	earliest := func(t *time.Time) {
		if t != nil && !t.IsZero() && (around == nil || t.Before(*around)) {
			around = t
		}
	}
	if st.Found {
		req.MsgID = st.MsgID
		if st.Partition != nil && st.Offset != nil {
			req.Partition, req.Offset = *st.Partition, *st.Offset
		}
		earliest(st.CreatedAt)
	}
	rec := MessageRecord(db.Idempotency)
	if rec != nil {
		if req.MsgID == "" {
			req.MsgID = rec.Key
		}
		earliest(rec.CreatedAt)
	}
	if id := p.Idempotency; id != nil && id.BizID == "" {
		// The records are found through the messages: every message of the
		// key in the window (linkRecords).
		req.All = true
	}
	if !st.Found && rec == nil {
		// No state row and no record (seed 000's schema): the evidence's
		// earliest time anchors the search, else the entity's time (seed
		// 003's orders.updated_at).
		t := EvidenceTime(db)
		if t == nil && db.Entity != nil {
			t = db.Entity.At
		}
		switch {
		case t != nil:
			earliest(t)
		case p.State == nil && p.Idempotency == nil:
			// No table of the pipeline can ever anchor it (seed 000's
			// own schema: the debit is only in the binlog, which is read
			// from the message; a STRANDED operation has no ledger row):
			// the message is searched by its key, anchored at now, among
			// the newest --search-limit records of its partition at most
			// UnanchoredWindow old (docs/where.md "Finding the message").
			now := db.Now
			if now.IsZero() {
				now = time.Now()
			}
			req.Newest, req.Window = true, max(req.Window, UnanchoredWindow)
			around = &now
		default:
			return req, false
		}
	}
	if around != nil {
		req.Around = *around
	}
	req.Key = []byte(Expand(p.MessageKey, map[string]string{"biz_id": bizID, "msg_id": req.MsgID}, false))
	return req, true
}

// probe starts one goroutine per probe call needed: each unacked intent of a
// remote step with a {request_id} probe, and each {biz_id} probe. Each
// answer is recorded where it belongs (the intent's Probe, the step's
// BizProbe), valid after wg.Wait. A probe is a downstream's answer, not a
// source of the report: an inconclusive one leaves its step unknown and
// the report is not partial for it (docs/verdicts.md#partial).
func (c *Collector) probe(ctx context.Context, wg *sync.WaitGroup, p *config.Pipeline, bizID string, ev *Evidence) {
	if c.Prober == nil {
		return
	}
	for i, s := range p.Steps {
		if s.Kind != config.KindRemote || s.Probe == "" || i >= len(ev.DB.Steps) {
			continue
		}
		se := &ev.DB.Steps[i]
		if containsVar(s.Probe, "request_id") {
			for j := range se.Intents {
				in := &se.Intents[j]
				if in.AckedAt != nil {
					continue
				}
				url := Expand(s.Probe, map[string]string{"request_id": in.RequestID, "biz_id": bizID}, true)
				wg.Add(1)
				go func(s config.Step) {
					defer wg.Done()
					pctx, cancel := context.WithTimeout(ctx, c.timeout())
					defer cancel()
					r := c.Prober.Probe(pctx, url, s.ProbeApplied, s.ProbeAbsent)
					in.Probe = &r
				}(s)
			}
		} else {
			url := Expand(s.Probe, map[string]string{"biz_id": bizID}, true)
			wg.Add(1)
			go func(s config.Step) {
				defer wg.Done()
				pctx, cancel := context.WithTimeout(ctx, c.timeout())
				defer cancel()
				r := c.Prober.Probe(pctx, url, s.ProbeApplied, s.ProbeAbsent)
				se.BizProbe = &r
			}(s)
		}
	}
}

func containsVar(tmpl, name string) bool {
	return len(tmpl) > 0 && (Expand(tmpl, map[string]string{name: "\x00"}, false) != tmpl)
}

// MessageRecord returns the idempotency record whose message opctl locates
// when there is no state row: the newest record that is not DONE (a SKIPPED
// or PENDING decision is what an operator asks about), else the newest. Rows
// are in created_at order. It returns nil when there are none.
func MessageRecord(rows []IdempotencyRow) *IdempotencyRow {
	if len(rows) == 0 {
		return nil
	}
	for i := len(rows) - 1; i >= 0; i-- {
		if rows[i].Action != "DONE" {
			return &rows[i]
		}
	}
	return &rows[len(rows)-1]
}

// ReadActionColumn reads the type of the idempotency action column into
// ev.DB.ActionColumn when a repair may have to reopen a SKIPPED record of
// ev (the pipeline leaves idempotency.reopen to the column's type and a
// record is SKIPPED): which value flip_skipped can write is the column's
// to say (docs/repair.md#reopening-a-skipped-record). A read that fails
// leaves it "" (the plan then refuses the flip and says why).
func (c *Collector) ReadActionColumn(ctx context.Context, ev *Evidence) {
	c = c.For(ev.Pipeline)
	id := ev.Pipeline.Idempotency
	ct, ok := c.DB.(ColumnTyper)
	if id == nil || id.Reopen != "" || !ok {
		return
	}
	skipped := false
	for _, r := range ev.DB.Idempotency {
		skipped = skipped || r.Action == "SKIPPED"
	}
	if !skipped {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	if t, err := ct.ColumnType(dctx, id.Table, id.Action); err == nil {
		ev.DB.ActionColumn = t
	}
}
