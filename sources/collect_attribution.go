package sources

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/sources/config"
)

// BinlogAttribution is how a binlog step's changes were weighed against
// the other operations that may own them (docs/where.md#binlog-evidence).
type BinlogAttribution struct {
	// Key and Delta are the row and the delta one effect makes.
	Key, Delta string
	// Count is the operation's count over every assignment of the changes:
	// exact when Min == Max, else the step is ambiguous.
	Count CountRange
	// Competitors are the other operations that may own one of the
	// operation's changes, each with how it was found and whether it is
	// known to have run.
	Competitors []Competitor
	// Shared are the operation's changes another operation may own.
	Shared []SharedChange
	// Notes say what limited the search or the weighing.
	Notes []string
}

// Competitor is another operation that may own a change.
type Competitor struct {
	BizID string
	// Found is how: "transaction" (its transaction tied a change of the
	// row) or "message" (its message names the row and the delta).
	Found string
	// Processed says why it is known to have run ("" when it is not):
	// it then owns at least one change.
	Processed string
}

// SharedChange is one of the operation's changes that another operation
// may own.
type SharedChange struct {
	ID string
	// With are the other operations that may own it; Unknown is true when
	// an operation that was not found may too.
	With    []string
	Unknown bool
}

// Attributions of a binlog change that another operation may own.
const AttributedShared = "shared"

// maxCompetitorReads bounds the competitors whose MySQL rows are read.
const maxCompetitorReads = 32

// attribute weighs the changes of req's row by delta for the operation of
// ev, whose window is [req.From, req.To], and returns its evidence rows:
// every change it owns in each assignment when its count is exact (the
// changes another operation may own in its place among them, attributed
// "shared"), every change it may own when the count is ambiguous, and the
// changes opctl reversed for it.
func (c *Collector) attribute(ctx context.Context, k int, req BinlogRequest, delta string, changes []BinlogChange, ev *Evidence) ([]Row, *BinlogAttribution, error) {
	want, ok := new(big.Rat).SetString(delta)
	if !ok {
		return nil, nil, fmt.Errorf("the message's delta %q is not a number", delta)
	}
	p := ev.Pipeline
	s := p.Steps[k]
	attr := &BinlogAttribution{Key: req.Key, Delta: delta}
	matching, err := sameRowDelta(changes, req.Key, want)
	if err != nil {
		return nil, nil, err
	}
	self := Claimant{BizID: ev.BizID, From: req.From, To: req.To}
	if why := processedBy(p, k, ev.DB, messagePos(ev), ev.Kafka.Group); why != "" {
		self.Processed = true
	}
	claimants := []Claimant{self}
	complete := true
	var comps []Competitor
	var untied []time.Time
	for _, ch := range matching {
		if len(ch.TxKeys) == 0 && within(ch.At, req.From, req.To) {
			untied = append(untied, ch.At)
		}
	}
	reversed := map[string]string{}
	for id := range ReversedIDs(ev.DB.Audit, s.Name) {
		reversed[id] = ev.BizID
	}
	if len(untied) > 0 {
		// Changes no transaction ties: which other operations may own
		// them?
		found := c.competitors(ctx, p, k, req, want, matching, slices.MinFunc(untied, cmpTime), slices.MaxFunc(untied, cmpTime), ev)
		complete = found.complete
		attr.Notes = append(attr.Notes, found.notes...)
		for _, x := range found.list {
			claimants = append(claimants, x.claim)
			comps = append(comps, x.comp)
			for id := range x.reversed {
				reversed[id] = x.claim.BizID
			}
		}
		// Their windows may reach past this one's: read what they cover,
		// so that each can own a change of its own there.
		lo, hi := req.From, req.To
		for _, x := range claimants {
			if x.From.Before(lo) {
				lo = x.From
			}
			if x.To.After(hi) {
				hi = x.To
			}
		}
		if lo.Before(req.From) || hi.After(req.To) {
			wide := req
			wide.From, wide.To, wide.Clamp = lo, hi, false
			read, err := c.readChanges(ctx, wide)
			if err == nil {
				matching, err = sameRowDelta(read.Changes, req.Key, want)
			}
			if err != nil {
				attr.Notes = append(attr.Notes, "the binlog past this operation's window could not be read ("+err.Error()+"): the other operations are not held to owning a change")
				for i := 1; i < len(claimants); i++ {
					claimants[i].Processed = false
				}
			}
		}
	}
	claims := make([]Claim, len(matching))
	for i, ch := range matching {
		claims[i] = Claim{Change: ch, ReversedBy: reversed[ch.ID()]}
		// Outside this operation's window the others' own competitors
		// were not searched; inside it, unless the search fell short.
		claims[i].Open = !within(ch.At, req.From, req.To) || !complete
	}
	a := AssignChanges(claims, claimants)
	if a.Relaxed != "" {
		attr.Notes = append(attr.Notes, a.Relaxed)
	}
	attr.Count = a.Counts[ev.BizID]
	rows, shared := ownRows(claims, a, ev.BizID, req)
	attr.Shared = shared
	for _, x := range comps {
		for _, sc := range shared {
			if slices.Contains(sc.With, x.BizID) {
				attr.Competitors = append(attr.Competitors, x)
				break
			}
		}
	}
	return rows, attr, nil
}

// ownRows are the operation's evidence rows (BinlogColumns): its changes
// opctl reversed, those it owns in every assignment, and those it may own —
// all of them when its count is ambiguous, as many as its count needs
// (oldest first) when it is exact — with the latter listed as shared.
func ownRows(claims []Claim, a Assignment, biz string, req BinlogRequest) ([]Row, []SharedChange) {
	cr := a.Counts[biz]
	certain := 0
	for i := range claims {
		if certainOf(claims[i], a, i, biz) {
			certain++
		}
	}
	room := len(claims) // ambiguous: every change it may own
	if cr.Exact() {
		room = cr.Min - certain
	}
	var rows []Row
	var shared []SharedChange
	for i, cl := range claims {
		ch := cl.Change
		how := AttributedMessage
		switch {
		case cl.ReversedBy == biz:
			if len(ch.TxKeys) > 0 {
				how = AttributedTransaction
			}
		case !slices.Contains(a.Owners[i], biz):
			continue
		case a.Tied[i] == biz:
			how = AttributedTransaction
		case certainOf(cl, a, i, biz):
		default:
			with := slices.DeleteFunc(slices.Clone(a.Owners[i]), func(x string) bool { return x == biz })
			shared = append(shared, SharedChange{ID: ch.ID(), With: with, Unknown: cl.Open || len(ch.TxKeys) > len(a.Owners[i])})
			if room <= 0 {
				continue
			}
			room--
			how = AttributedShared
		}
		d, _ := ch.Delta()
		rows = append(rows, Row{Columns: BinlogColumns, Values: []Value{ch.ID(), ch.Key, d, ch.Before, ch.After, ch.At, how}})
	}
	return rows, shared
}

// certainOf reports whether claim i is biz's whatever the assignment: tied
// to it, or no one else (found or not) may own it.
func certainOf(cl Claim, a Assignment, i int, biz string) bool {
	if cl.ReversedBy != "" || !slices.Contains(a.Owners[i], biz) {
		return false
	}
	return a.Tied[i] == biz || (len(a.Owners[i]) == 1 && !cl.Open && len(cl.Change.TxKeys) <= 1)
}

// sameRowDelta keeps the changes of the row key by delta (compared as
// numbers: "-30" = "-30.00"), in binlog order.
func sameRowDelta(changes []BinlogChange, key string, want *big.Rat) ([]BinlogChange, error) {
	var out []BinlogChange
	for _, ch := range changes {
		if key != "" && fmt.Sprint(ch.Key) != key {
			continue
		}
		d, err := ch.Delta()
		if err != nil {
			return nil, fmt.Errorf("change %s: %v", ch.ID(), err)
		}
		got, _ := new(big.Rat).SetString(d)
		if got.Cmp(want) == 0 {
			out = append(out, ch)
		}
	}
	return out, nil
}

func cmpTime(a, b time.Time) int { return a.Compare(b) }

// competitor is another operation that may own changes of the row.
type competitor struct {
	claim    Claimant
	comp     Competitor
	reversed map[string]bool
}

// found is what the search for competitors found.
type found struct {
	list     []competitor
	complete bool
	notes    []string
}

// competitors finds the other operations that may own a change of the row
// by the delta stamped in [first, last] (docs/where.md#binlog-evidence):
// those a change's transaction names (binlog.transaction), and those whose
// message, read from the topic over [first − window, last + 1 s] (every
// operation whose window can hold such a change; at most --search-limit
// records a partition), names the row and the delta. For each, its MySQL rows say whether it was processed, from when
// its window runs, and which of its changes opctl reversed. complete is
// false when the topic could not be read whole.
func (c *Collector) competitors(ctx context.Context, p *config.Pipeline, k int, req BinlogRequest, want *big.Rat, matching []BinlogChange, first, last time.Time, ev *Evidence) found {
	s := p.Steps[k]
	window := s.Binlog.WindowDuration()
	out := found{complete: true}
	byID := map[string]*competitor{}
	var order []string
	add := func(biz, how string) *competitor {
		if x, ok := byID[biz]; ok {
			return x
		}
		x := &competitor{claim: Claimant{BizID: biz}, comp: Competitor{BizID: biz, Found: how}}
		byID[biz] = x
		order = append(order, biz)
		return x
	}
	// Tied by their transaction: processed, and a change of their own.
	for _, ch := range matching {
		for _, biz := range ch.TxKeys {
			if biz == ev.BizID {
				continue
			}
			x := add(biz, AttributedTransaction)
			x.claim.Processed, x.comp.Processed = true, "its transaction wrote change "+ch.ID()
			x.claim.From, x.claim.To = minTime(x.claim.From, ch.At.Add(-window)), maxTime(x.claim.To, ch.At.Add(window))
		}
	}
	// Named by their message.
	from, to := first.Add(-window), last.Add(time.Second)
	rr, ok := c.Kafka.(RecordReader)
	switch {
	case c.Kafka == nil || !ok:
		out.complete = false
		out.notes = append(out.notes, "Kafka cannot be read, so the other operations whose messages name the row were not searched")
	default:
		limit := c.SearchLimit
		if limit <= 0 {
			limit = DefaultSearchLimit
		}
		keyPath, _ := config.ParseMessagePath(s.Binlog.MessageKey, false)
		deltaPath, _ := config.ParseMessagePath(s.Binlog.MessageDelta, true)
		var named []Message
		read, err := rr.Records(ctx, p.Topic, from, to, limit, func(m *Message) {
			if kv, err := keyPath.Lookup(m.Value); err != nil || kv != req.Key {
				return
			}
			dv, err := deltaPath.Lookup(m.Value)
			if err != nil {
				return
			}
			if d, ok := new(big.Rat).SetString(dv); ok && d.Cmp(want) == 0 {
				named = append(named, *m)
			}
		})
		switch {
		case err != nil:
			out.complete = false
			out.notes = append(out.notes, "the other operations whose messages name the row were not all searched: "+err.Error())
		case len(read.Cut) > 0:
			out.complete = false
			out.notes = append(out.notes, fmt.Sprintf("%s holds more than %d records (--search-limit) in a partition from %s to %s (partitions %v): the other operations whose messages name the row were not all searched",
				p.Topic, limit, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), read.Cut))
		}
		for i := range named {
			m := &named[i]
			biz, known := BizIDOfKey(p.MessageKey, m.Key)
			if !known {
				biz = fmt.Sprintf("record %d/%d", m.Partition, m.Offset)
			}
			if biz == ev.BizID {
				continue
			}
			x := add(biz, AttributedMessage)
			x.claim.From, x.claim.To = minTime(x.claim.From, m.Timestamp.Add(-time.Second)), maxTime(x.claim.To, m.Timestamp.Add(window))
			if known && x.comp.Processed == "" {
				x.comp.Processed = processedBy(p, k, DBEvidence{}, m, ev.Kafka.Group)
				x.claim.Processed = x.comp.Processed != ""
			}
			if !known {
				out.notes = append(out.notes, fmt.Sprintf("the operation of the record at %s/%d/%d cannot be told from its key (message_key %q): it is not held to owning a change", p.Topic, m.Partition, m.Offset, p.MessageKey))
			}
		}
	}
	// Their MySQL rows: processed, an earlier start, reversals.
	var wg sync.WaitGroup
	var mu sync.Mutex
	sem := make(chan struct{}, 8)
	read := 0
	for _, biz := range order {
		x := byID[biz]
		if strings.HasPrefix(biz, "record ") || c.DB == nil {
			continue
		}
		if read++; read > maxCompetitorReads {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			dctx, cancel := context.WithTimeout(ctx, c.timeout())
			db, err := c.DB.ReadOperation(dctx, p, c.AuditTable, biz)
			cancel()
			mu.Lock()
			defer mu.Unlock()
			if err != nil && len(db.Steps) == 0 {
				out.notes = append(out.notes, "the rows of "+biz+" could not be read: "+err.Error())
				return
			}
			if why := processedBy(p, k, db, nil, GroupView{}); why != "" && x.comp.Processed == "" {
				x.claim.Processed, x.comp.Processed = true, why
			}
			if t := earliestOf(db); t != nil {
				x.claim.From = minTime(x.claim.From, t.Add(-time.Second))
				x.claim.To = maxTime(x.claim.To, t.Add(window))
			}
			x.reversed = ReversedIDs(db.Audit, s.Name)
		})
	}
	wg.Wait()
	if read > maxCompetitorReads {
		out.notes = append(out.notes, fmt.Sprintf("%d other operations may own the changes; the rows of the first %d were read", read, maxCompetitorReads))
	}
	for _, biz := range order {
		out.list = append(out.list, *byID[biz])
	}
	slices.Sort(out.notes)
	out.notes = slices.Compact(out.notes)
	return out
}

// earliestOf is the earliest known time of an operation's rows.
func earliestOf(db DBEvidence) *time.Time {
	var out *time.Time
	consider := func(t *time.Time) {
		if t != nil && !t.IsZero() && (out == nil || t.Before(*out)) {
			out = t
		}
	}
	if db.State.Found {
		consider(db.State.CreatedAt)
	}
	for _, r := range db.Idempotency {
		consider(r.CreatedAt)
	}
	consider(EvidenceTime(db))
	return out
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// messagePos is the operation's message, or its position alone, nil when
// neither is known.
func messagePos(ev *Evidence) *Message {
	if ev.Kafka.Message != nil {
		return ev.Kafka.Message
	}
	if ev.Kafka.Partition >= 0 && ev.Kafka.Offset >= 0 {
		return &Message{Partition: ev.Kafka.Partition, Offset: ev.Kafka.Offset}
	}
	return nil
}

// processedBy says why an operation is known to have run past binlog step
// k (rule 2 of the assignment), "" when nothing says so: a later step's
// evidence row or acked intent, a terminal state, a DONE idempotency
// record, or — when the consumers commit only after every step — the
// group committed past its message.
func processedBy(p *config.Pipeline, k int, db DBEvidence, msg *Message, g GroupView) string {
	for i := k + 1; i < len(p.Steps) && i < len(db.Steps); i++ {
		if p.Steps[i].Binlog != nil {
			continue
		}
		se := db.Steps[i]
		if len(se.Rows) > 0 {
			return "step " + p.Steps[i].Name + " has an evidence row"
		}
		for _, in := range se.Intents {
			if in.AckedAt != nil {
				return "step " + p.Steps[i].Name + " has an acked call"
			}
		}
	}
	if db.State.Found && p.State != nil && slices.Contains(p.State.Terminal, db.State.Status) {
		return "its state is " + db.State.Status
	}
	for _, r := range db.Idempotency {
		if r.Action == "DONE" {
			return "its idempotency record is DONE"
		}
	}
	if msg != nil && p.EffectiveCommit() == config.CommitAfterSteps {
		if pv, ok := g.Partitions[msg.Partition]; ok && pv.Committed > msg.Offset {
			return fmt.Sprintf("the group committed past its message (partition %d offset %d)", msg.Partition, msg.Offset)
		}
	}
	return ""
}

// ReversedIDs are the identities of step's evidence rows that opctl's
// audit says were reversed: named by an applied reverse action, or
// attested reversed by an applied manual one (as inspect's Attestations
// read them, docs/verdicts.md#attestations-from-the-audit).
func ReversedIDs(audit []AuditAction, step string) map[string]bool {
	out := map[string]bool{}
	for _, a := range audit {
		if a.Outcome != AuditApplied || a.Step != step {
			continue
		}
		switch a.Action {
		case AuditReverse:
			if a.ReversedID != "" {
				out[a.ReversedID] = true
			}
		case AuditManual:
			for id, o := range a.Attested {
				if o == "reversed" {
					out[id] = true
				}
			}
		}
	}
	return out
}

// BizIDOfKey is the operation id a message key holds, by the pipeline's
// message_key template: one {biz_id} between fixed text ("{biz_id}",
// "order-{biz_id}"). false when the template holds anything else or the
// key does not fit it.
func BizIDOfKey(tmpl string, key []byte) (string, bool) {
	pre, post, ok := strings.Cut(tmpl, "{biz_id}")
	if !ok || strings.ContainsAny(pre+post, "{}") {
		return "", false
	}
	k := string(key)
	if len(k) < len(pre)+len(post) || !strings.HasPrefix(k, pre) || !strings.HasSuffix(k, post) {
		return "", false
	}
	return k[len(pre) : len(k)-len(post)], true
}
