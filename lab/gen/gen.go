// Package gen loads synthetic operations of the settlement pipeline (seed
// 000, testdata/schema/settlement.sql) and the orders skip pipeline (seed
// 003, testdata/schema/skip.sql) into MariaDB/MySQL, with a known, seeded
// set of anomalies, and returns a Manifest listing every one of them with
// the check that must find it and the verdict `opctl where` gives it.
//
// It is the source of "known anomalies" for reconcile's tests and for
// bench/reconcile.sh. Rows go in with multi-row INSERTs, one writer per
// table, so a million operations load in about half a minute.
package gen

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// Pipeline names, as in testdata/config/settlement.yaml and skip.yaml.
const (
	Settlement = "settlement"
	Orders     = "orders"
)

// Options shape a generated data set.
type Options struct {
	// Ops is the number of operations, split evenly between the pipelines.
	Ops int
	// Pipelines to load (default both).
	Pipelines []string
	// AnomalyRate is the fraction of each pipeline's operations that are
	// anomalies (default 0.001).
	AnomalyRate float64
	// SkipRate is the fraction of orders with a correct SKIPPED record:
	// half on a refunded order (SKIPPED_OK), half a stale event skipped
	// after the effect was done (COMPLETE). Default 0.02.
	SkipRate float64
	// Seed makes the layout reproducible (default 1).
	Seed uint64
	// End is the time of the newest operation (default: now - 15m, UTC,
	// millisecond precision); operations are spread evenly over
	// [End - Span, End] (default Span: 24h).
	End  time.Time
	Span time.Duration
	// AnomalySpan, when set, places every anomaly in [End - AnomalySpan,
	// End] (the history before it is clean, as if reconciled by earlier runs).
	AnomalySpan time.Duration
	// OpsPerTick operations share each timestamp (default 1): equal
	// timestamps for the keyset tie-breaks.
	OpsPerTick int
	// SameInstant writes every time column of an operation's rows at its
	// tick's timestamp (no offsets between the steps): with OpsPerTick >=
	// Ops, every row of every table shares one millisecond.
	SameInstant bool
	// AnomaliesLast seeds the anomalies and look-alikes on the newest
	// operations (the last ones in id and key order) instead of at random.
	AnomaliesLast bool
	// SettlementPrefix and OrderPrefix start the biz_ids (default "PAY-",
	// "ORD-"); any UTF-8 text.
	SettlementPrefix, OrderPrefix string
	// Partitions of the settlement topic (default 8). Settlement operation i
	// is stored at partition i mod Partitions, offset i div Partitions.
	Partitions int
	// Kafka adds the anomalies that need Kafka to be seen: stuck operations
	// that are STRANDED (the group committed past them) and terminal
	// operations past the committed offset (COMPLETE_UNCOMMITTED). The
	// caller must then make the log and the group match Manifest.Kafka.
	Kafka bool
	// Batch is the rows per INSERT (default 1000).
	Batch int
}

// Anomaly is one seeded anomaly.
type Anomaly struct {
	BizID    string `json:"biz_id"`
	Pipeline string `json:"pipeline"`
	// Check is the reconcile check that must find it.
	Check string `json:"check"`
	// Verdict is what `opctl where` says; Severity is its severity.
	Verdict  string `json:"verdict"`
	Severity string `json:"severity"`
	// Step is set when one step is at fault.
	Step string    `json:"step,omitempty"`
	At   time.Time `json:"at"`
	// NeedsKafka marks anomalies seen only with the Kafka layout in place.
	NeedsKafka bool `json:"needs_kafka,omitempty"`
}

// KafkaLayout is how the settlement topic must look for the stored
// positions to mean what the manifest says: LogEnd[p] records in partition
// p, and the group committed at Committed[p].
type KafkaLayout struct {
	Topic      string  `json:"topic"`
	Group      string  `json:"group"`
	Partitions int     `json:"partitions"`
	LogEnd     []int64 `json:"log_end"`
	Committed  []int64 `json:"committed"`
}

// Manifest describes a generated data set.
type Manifest struct {
	Ops       map[string]int `json:"ops"`
	Rows      map[string]int `json:"rows"`
	Seed      uint64         `json:"seed"`
	Start     time.Time      `json:"start"`
	End       time.Time      `json:"end"`
	Anomalies []Anomaly      `json:"anomalies"`
	// Noise counts look-alikes that are not anomalies (in-flight leases,
	// reversed duplicates, correct skips).
	Noise map[string]int `json:"noise"`
	Kafka *KafkaLayout   `json:"kafka,omitempty"`
	// Seconds is the load time.
	Seconds float64 `json:"seconds"`
}

// Expected returns the anomalies of pipeline and check (all when empty).
func (m *Manifest) Expected(pipeline, check string) []Anomaly {
	var out []Anomaly
	for _, a := range m.Anomalies {
		if (pipeline == "" || a.Pipeline == pipeline) && (check == "" || a.Check == check) {
			out = append(out, a)
		}
	}
	return out
}

func (o *Options) defaults() error {
	if o.Ops <= 0 {
		return errors.New("gen: Ops must be positive")
	}
	if len(o.Pipelines) == 0 {
		o.Pipelines = []string{Settlement, Orders}
	}
	for _, p := range o.Pipelines {
		if p != Settlement && p != Orders {
			return fmt.Errorf("gen: unknown pipeline %q (settlement, orders)", p)
		}
	}
	if o.AnomalyRate == 0 {
		o.AnomalyRate = 0.001
	}
	if o.AnomalyRate < 0 || o.AnomalyRate > 0.2 {
		return fmt.Errorf("gen: AnomalyRate %v: want (0, 0.2]", o.AnomalyRate)
	}
	if o.SkipRate == 0 {
		o.SkipRate = 0.02
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.End.IsZero() {
		o.End = time.Now().UTC().Add(-15 * time.Minute)
	}
	o.End = o.End.UTC().Truncate(time.Millisecond)
	if o.Span <= 0 {
		o.Span = 24 * time.Hour
	}
	if o.AnomalySpan <= 0 || o.AnomalySpan > o.Span {
		o.AnomalySpan = o.Span
	}
	if o.OpsPerTick <= 0 {
		o.OpsPerTick = 1
	}
	if o.SettlementPrefix == "" {
		o.SettlementPrefix = "PAY-"
	}
	if o.OrderPrefix == "" {
		o.OrderPrefix = "ORD-"
	}
	if o.Partitions <= 0 {
		o.Partitions = 8
	}
	if o.Batch <= 0 {
		o.Batch = 1000
	}
	return nil
}

// Generate loads the data set into db, whose tables (settlement.sql and/or
// skip.sql) must exist and be empty, and returns its manifest.
func Generate(ctx context.Context, db *sql.DB, o Options) (*Manifest, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	start := time.Now()
	m := &Manifest{Ops: map[string]int{}, Rows: map[string]int{}, Seed: o.Seed,
		Start: o.End.Add(-o.Span), End: o.End, Noise: map[string]int{}}
	l := newLoader(ctx, db, o.Batch)
	per := o.Ops / len(o.Pipelines)
	for i, p := range o.Pipelines {
		n := per
		if i == 0 {
			n += o.Ops - per*len(o.Pipelines)
		}
		m.Ops[p] = n
		switch p {
		case Settlement:
			settlement(&o, n, m, l)
		case Orders:
			orders(&o, n, m, l)
		}
	}
	if err := l.close(); err != nil {
		return nil, err
	}
	for t, n := range l.counts {
		m.Rows[t] = n
	}
	slices.SortFunc(m.Anomalies, func(a, b Anomaly) int {
		return strings.Compare(a.Pipeline+"\x00"+a.BizID, b.Pipeline+"\x00"+b.BizID)
	})
	m.Seconds = time.Since(start).Seconds()
	return m, nil
}

// timeOf is the timestamp of operation i of n.
func timeOf(o *Options, i, n int) time.Time {
	ticks := (n + o.OpsPerTick - 1) / o.OpsPerTick
	tick := i / o.OpsPerTick
	if ticks <= 1 {
		return o.End
	}
	step := o.Span / time.Duration(ticks-1)
	return o.End.Add(-o.Span + time.Duration(tick)*step).Truncate(time.Millisecond)
}

// offset returns the time d after t of one operation's rows: t itself
// with SameInstant.
func (o *Options) offset(t time.Time) func(d time.Duration) time.Time {
	return func(d time.Duration) time.Time {
		if o.SameInstant {
			return t
		}
		return t.Add(d)
	}
}

// pick chooses count distinct operation indexes among [0, n) whose time is
// within the anomaly span and that are not excluded, with the seeded RNG
// (with AnomaliesLast: the last such indexes).
func pick(o *Options, rng *rand.Rand, n, count int, excluded func(int) bool) []int {
	first := 0
	for first < n && timeOf(o, first, n).Before(o.End.Add(-o.AnomalySpan)) {
		first++
	}
	pool := n - first
	if count > pool {
		count = pool
	}
	chosen := map[int]bool{}
	out := make([]int, 0, count)
	if o.AnomaliesLast {
		for i := n - 1; i >= first && len(out) < count; i-- {
			if excluded == nil || !excluded(i) {
				out = append(out, i)
			}
		}
		return out
	}
	for tries := 0; len(out) < count && tries < 100*count+1000; tries++ {
		i := first + rng.IntN(pool)
		if chosen[i] || (excluded != nil && excluded(i)) {
			continue
		}
		chosen[i] = true
		out = append(out, i)
	}
	return out
}

// kinds splits total anomalies between k kinds, round robin.
func split(total, k int) []int {
	out := make([]int, k)
	for i := range total {
		out[i%k]++
	}
	return out
}

func anomalyCount(o *Options, n int) int {
	c := int(float64(n)*o.AnomalyRate + 0.5)
	if c == 0 && n > 0 {
		c = 1
	}
	return c
}

const ms = time.Millisecond

// settlement kinds of operation.
const (
	sHealthy = iota
	sDuplicate
	sStateBehind
	sMissingEffect
	sOrphan
	sStranded
	sUncommitted
	sInFlight
	sReversedDup
)

func settlement(o *Options, n int, m *Manifest, l *loader) {
	rng := rand.New(rand.NewPCG(o.Seed, 0x5e771e))
	kind := make([]uint8, n)
	parts := o.Partitions
	logEnd := make([]int64, parts)
	for i := range n {
		logEnd[i%parts]++
	}
	committed := slices.Clone(logEnd)
	// The tail of each partition (the last op) is reserved for the
	// uncommitted anomalies so that every other op is below the committed
	// offset.
	isTail := func(i int) bool { return int64(i/parts) == logEnd[i%parts]-1 }

	total := anomalyCount(o, n)
	kinds := []uint8{sDuplicate, sStateBehind, sMissingEffect, sOrphan}
	if o.Kafka {
		kinds = append(kinds, sStranded, sUncommitted)
	}
	counts := split(total, len(kinds))
	taken := func(i int) bool { return kind[i] != sHealthy || isTail(i) }
	for k, kd := range kinds {
		if kd == sUncommitted {
			// The last op of up to counts[k] partitions.
			c := min(counts[k], parts)
			for p := range c {
				if logEnd[p] == 0 {
					continue
				}
				i := int(logEnd[p]-1)*parts + p
				kind[i] = sUncommitted
				committed[p] = logEnd[p] - 1
			}
			continue
		}
		for _, i := range pick(o, rng, n, counts[k], taken) {
			kind[i] = kd
		}
	}
	// Look-alikes: as many in-flight leases and reversed duplicates as
	// duplicates.
	for _, kd := range []uint8{sInFlight, sReversedDup} {
		for _, i := range pick(o, rng, n, max(1, counts[0]), taken) {
			kind[i] = kd
		}
	}
	if o.Kafka {
		m.Kafka = &KafkaLayout{Topic: "settlement-event", Group: "settlement-consumer", Partitions: parts,
			LogEnd: logEnd, Committed: committed}
	}

	state := l.table("biz_operation", "biz_id, status, version, owner, lease_until, msg_id, src_partition, src_offset, attempts, created_at, updated_at")
	journal := l.table("balance_journal", "biz_id, account_id, delta, kind, reverses_id, created_at")
	ledger := l.table("ledger_entry", "biz_order_id, direction, amount, created_at")
	intent := l.table("step_intent", "request_id, biz_id, step, attempt, sent_at, acked_at, result")
	lease := o.End.Add(365 * 24 * time.Hour)

	// Journal ids of the reversed look-alikes are assigned by the server;
	// the REVERSAL row names its DEBIT through a per-op id range instead.
	for i := range n {
		id := fmt.Sprintf("%s%09d", o.SettlementPrefix, i)
		t := timeOf(o, i, n)
		at := o.offset(t)
		part, off := int64(i%parts), int64(i/parts)
		acct := int64(1000 + i%997)
		amt := fmt.Sprintf("%d.%02d", 1+i%500, i%100)
		msg := "m-" + id
		add := func(check, verdict, sev, step string, needsKafka bool) {
			m.Anomalies = append(m.Anomalies, Anomaly{BizID: id, Pipeline: Settlement, Check: check,
				Verdict: verdict, Severity: sev, Step: step, At: t, NeedsKafka: needsKafka})
		}
		debit := func(at time.Time) { journal.add(id, acct, "-"+amt, "DEBIT", 0, at) }
		switch kind[i] {
		case sHealthy, sUncommitted, sDuplicate, sReversedDup:
			state.add(id, "DONE", 4, nil, nil, msg, part, off, 1, t, at(900*ms))
			debit(at(100 * ms))
			ledger.add(id, "OUT", amt, at(200*ms))
			intent.add(id+":notify:1", id, "notify", 1, at(300*ms), at(400*ms), "OK")
			switch kind[i] {
			case sUncommitted:
				add("uncommitted", "COMPLETE_UNCOMMITTED", "watch", "", true)
			case sDuplicate:
				debit(at(500 * ms))
				add("duplicates", "DUPLICATE_EFFECT", "action", "debit", false)
			case sReversedDup:
				// A second debit that was reversed: three rows for the key
				// in the scan table, one effect by the evidence query.
				journal.addReversal(id, acct, amt, at(500*ms), at(600*ms))
				m.Noise["reversed_duplicate"]++
			}
		case sStateBehind:
			// Died after the debit, before the state update (naive order).
			state.add(id, "INIT", 1, nil, nil, msg, part, off, 1, t, t)
			debit(at(100 * ms))
			add("stuck", "STATE_BEHIND", "action", "debit", false)
		case sMissingEffect:
			state.add(id, "LEDGER_DONE", 3, nil, nil, msg, part, off, 1, t, at(300*ms))
			debit(at(100 * ms))
			add("stuck", "MISSING_EFFECT", "action", "ledger", false)
		case sStranded:
			state.add(id, "DEBIT_DONE", 2, nil, nil, msg, part, off, 1, t, at(200*ms))
			debit(at(100 * ms))
			add("stuck", "STRANDED", "action", "", true)
		case sOrphan:
			// Evidence without a state row: the state insert was lost.
			debit(at(100 * ms))
			add("orphans", "STATE_BEHIND", "action", "debit", false)
		case sInFlight:
			state.add(id, "DEBIT_DONE", 2, "consumer-7", lease, msg, part, off, 1, t, at(200*ms))
			debit(at(100 * ms))
			m.Noise["in_flight"]++
		}
	}
}

// orders kinds of operation.
const (
	oHealthy = iota
	oWronglySkipped
	oDuplicate
	oCancelled
	oStaleSkip
)

func orders(o *Options, n int, m *Manifest, l *loader) {
	rng := rand.New(rand.NewPCG(o.Seed, 0x0dde75))
	kind := make([]uint8, n)
	taken := func(i int) bool { return kind[i] != oHealthy }
	total := anomalyCount(o, n)
	counts := split(total, 2)
	for k, kd := range []uint8{oWronglySkipped, oDuplicate} {
		for _, i := range pick(o, rng, n, counts[k], taken) {
			kind[i] = kd
		}
	}
	skips := int(float64(n)*o.SkipRate + 0.5)
	sc := split(skips, 2)
	for k, kd := range []uint8{oCancelled, oStaleSkip} {
		// Correct skips anywhere in the history.
		for range sc[k] {
			i := rng.IntN(n)
			if !taken(i) {
				kind[i] = kd
			}
		}
	}
	ord := l.table("orders", "order_id, status, updated_at")
	idem := l.table("consumer_idempotency", "msg_id, biz_id, action, reason, entity_status_seen, created_at, updated_at")
	points := l.table("points_grant", "order_id, msg_id, points, created_at")
	statuses := []string{"PAID", "SHIPPED", "DELIVERED"}
	for i := range n {
		id := fmt.Sprintf("%s%09d", o.OrderPrefix, i)
		t := timeOf(o, i, n)
		at := o.offset(t)
		paid, shipped := "o-"+id+"-paid", "o-"+id+"-shipped"
		add := func(check, verdict, step string) {
			m.Anomalies = append(m.Anomalies, Anomaly{BizID: id, Pipeline: Orders, Check: check,
				Verdict: verdict, Severity: "action", Step: step, At: t})
		}
		switch kind[i] {
		case oHealthy, oDuplicate, oStaleSkip:
			st := statuses[i%len(statuses)]
			if kind[i] == oStaleSkip {
				st = "SHIPPED"
			}
			ord.add(id, st, at(time.Second))
			idem.add(paid, id, "DONE", nil, "PAID", t, t)
			points.add(id, paid, 100+i%50, at(100*ms))
			if st != "PAID" {
				idem.add(shipped, id, "DONE", nil, "PAID", at(500*ms), at(500*ms))
			}
			switch kind[i] {
			case oDuplicate:
				// The PAID event redelivered under a new message id.
				points.add(id, paid+"-r", 100+i%50, at(700*ms))
				add("duplicates", "DUPLICATE_EFFECT", "points")
			case oStaleSkip:
				idem.add(shipped+"-dup", id, "SKIPPED", "duplicate event", "SHIPPED", at(800*ms), at(800*ms))
				m.Noise["stale_skip"]++
			}
		case oWronglySkipped:
			// Seed 003: SHIPPED handled before PAID; PAID saw SHIPPED != PAID.
			ord.add(id, "SHIPPED", at(time.Second))
			idem.add(shipped, id, "DONE", nil, "PAID", t, t)
			idem.add(paid, id, "SKIPPED", "order SHIPPED, event expects PAID", "SHIPPED", at(500*ms), at(500*ms))
			add("skipped", "WRONGLY_SKIPPED", "points")
		case oCancelled:
			ord.add(id, "REFUNDED", at(time.Second))
			idem.add(paid, id, "SKIPPED", "order REFUNDED", "REFUNDED", at(500*ms), at(500*ms))
			m.Noise["cancelled_skip"]++
		}
	}
}

// loader writes rows with multi-row INSERTs, one goroutine per table.
type loader struct {
	ctx    context.Context
	db     *sql.DB
	batch  int
	mu     sync.Mutex
	err    error
	wg     sync.WaitGroup
	tables []*tableWriter
	counts map[string]int
	// reversals are written by close, one by one (few).
	reversals []reversal
}

func newLoader(ctx context.Context, db *sql.DB, batch int) *loader {
	return &loader{ctx: ctx, db: db, batch: batch, counts: map[string]int{}}
}

type tableWriter struct {
	l     *loader
	name  string
	cols  string
	ncol  int
	rows  []any
	count int
	ch    chan []any
}

// table returns the writer of a table (names are the generator's own
// constants, never input).
func (l *loader) table(name, cols string) *tableWriter {
	w := &tableWriter{l: l, name: name, cols: cols, ncol: strings.Count(cols, ",") + 1, ch: make(chan []any, 4)}
	l.tables = append(l.tables, w)
	l.wg.Go(func() {
		for vals := range w.ch {
			if l.failed() {
				continue
			}
			n := len(vals) / w.ncol
			row := "(" + strings.TrimSuffix(strings.Repeat("?,", w.ncol), ",") + ")"
			q := "INSERT INTO " + w.name + " (" + w.cols + ") VALUES " + strings.TrimSuffix(strings.Repeat(row+",", n), ",")
			if _, err := l.db.ExecContext(l.ctx, q, vals...); err != nil {
				l.fail(fmt.Errorf("gen: insert into %s: %w", w.name, err))
			}
		}
	})
	return w
}

func (l *loader) failed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err != nil
}

func (l *loader) fail(err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	l.mu.Unlock()
}

func (w *tableWriter) add(vals ...any) {
	w.rows = append(w.rows, vals...)
	w.count++
	if len(w.rows)/w.ncol >= w.l.batch {
		w.flush()
	}
}

// addReversal records a second DEBIT and its REVERSAL, written after the
// bulk load so that the REVERSAL can name the DEBIT's server-assigned id.
func (w *tableWriter) addReversal(id string, acct int64, amt string, debitAt, revAt time.Time) {
	w.count += 2
	w.l.reversals = append(w.l.reversals, reversal{id, acct, amt, debitAt, revAt})
}

func (w *tableWriter) flush() {
	if len(w.rows) == 0 {
		return
	}
	w.ch <- w.rows
	w.rows = nil
}

type reversal struct {
	id       string
	acct     int64
	amt      string
	at, revA time.Time
}

func (l *loader) close() error {
	for _, w := range l.tables {
		w.flush()
		close(w.ch)
	}
	l.wg.Wait()
	for _, w := range l.tables {
		l.counts[w.name] += w.count
	}
	if l.err != nil {
		return l.err
	}
	// Reversed duplicates: a DEBIT, then a REVERSAL naming its id.
	for _, r := range l.reversals {
		res, err := l.db.ExecContext(l.ctx, "INSERT INTO balance_journal (biz_id, account_id, delta, kind, reverses_id, created_at) VALUES (?, ?, ?, 'DEBIT', 0, ?)",
			r.id, r.acct, "-"+r.amt, r.at)
		if err != nil {
			return fmt.Errorf("gen: insert reversed debit: %w", err)
		}
		did, err := res.LastInsertId()
		if err != nil {
			return err
		}
		if _, err := l.db.ExecContext(l.ctx, "INSERT INTO balance_journal (biz_id, account_id, delta, kind, reverses_id, created_at) VALUES (?, ?, ?, 'REVERSAL', ?, ?)",
			r.id, r.acct, r.amt, did, r.revA); err != nil {
			return fmt.Errorf("gen: insert reversal: %w", err)
		}
	}
	return l.err
}
