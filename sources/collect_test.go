package sources

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/sources/config"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"biz_id": "a b&c", "request_id": "r/1"}
	cases := []struct {
		tmpl   string
		escape bool
		want   string
	}{
		{"{biz_id}", false, "a b&c"},
		{"http://h/x?id={biz_id}&r={request_id}", true, "http://h/x?id=a+b%26c&r=r%2F1"},
		{"{unknown}-{biz_id}", false, "{unknown}-a b&c"},
		{"no vars", false, "no vars"},
		{"open {biz_id", false, "open {biz_id"},
	}
	for _, c := range cases {
		if got := Expand(c.tmpl, vars, c.escape); got != c.want {
			t.Errorf("Expand(%q) = %q, want %q", c.tmpl, got, c.want)
		}
	}
}

func TestLocateRequest(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := &config.Pipeline{Topic: "t", Partitioner: "murmur2", MessageKey: "order-{biz_id}"}
	c := &Collector{}
	part, off := int32(3), int64(42)
	later := t0.Add(time.Minute)

	// State row with a stored position: the position and its msg_id are used.
	req, ok := c.locateRequest(p, "7", DBEvidence{State: StateRow{Found: true, MsgID: "m-1", Partition: &part, Offset: &off, CreatedAt: &later},
		Idempotency: []IdempotencyRow{{Key: "m-0", Action: "DONE", CreatedAt: &t0}}})
	if !ok || req.Partition != 3 || req.Offset != 42 || req.MsgID != "m-1" || string(req.Key) != "order-7" || !req.Around.Equal(t0) {
		t.Fatalf("stored: %+v", req)
	}
	if req.Window != 5*time.Minute || req.Limit != 50000 {
		t.Errorf("defaults: %+v", req)
	}
	// No state row: the SKIPPED record's message, searched from its time.
	req, ok = c.locateRequest(p, "7", DBEvidence{Idempotency: []IdempotencyRow{
		{Key: "m-2", Action: "DONE", CreatedAt: &t0}, {Key: "m-3", Action: "SKIPPED", CreatedAt: &later}, {Key: "m-4", Action: "DONE", CreatedAt: &later}}})
	if !ok || req.MsgID != "m-3" || req.Partition != -1 || !req.Around.Equal(later) {
		t.Fatalf("skipped: %+v", req)
	}
	// Nothing to anchor a search on a pipeline that has a state table: no
	// request (the operation is not this pipeline's).
	withState := *p
	withState.State = &config.State{Table: "s", Key: "id", Status: "status"}
	if _, ok := c.locateRequest(&withState, "7", DBEvidence{}); ok {
		t.Fatal("a search without any row")
	}
	// A pipeline no row can ever anchor (no state, no idempotency table:
	// seed 000's own schema): the newest records of the key's partition,
	// anchored at the database clock, over UnanchoredWindow.
	req, ok = c.locateRequest(p, "7", DBEvidence{Now: later})
	if !ok || !req.Newest || !req.Around.Equal(later) || req.Window != UnanchoredWindow || req.Limit != 50000 || string(req.Key) != "order-7" {
		t.Fatalf("unanchored: %+v", req)
	}
	// A record without a timestamp: the request carries no time, so the
	// reader reports the position unknown instead of scanning from the head.
	req, ok = c.locateRequest(p, "7", DBEvidence{Idempotency: []IdempotencyRow{{Key: "m-5", Action: "PENDING"}}})
	if !ok || !req.Around.IsZero() {
		t.Fatalf("no timestamp: %+v", req)
	}
}

// namedPartial is a partial read error that names its failed queries, as
// sources/mysql's *PartialError does.
type namedPartial struct {
	queries []string
	errs    []error
}

func (e namedPartial) Error() string {
	return "mysql 127.0.0.1:3306: partial read: " + e.queries[0] + " query: " + e.errs[0].Error()
}
func (namedPartial) Partial() bool       { return true }
func (e namedPartial) Queries() []string { return e.queries }
func (e namedPartial) Unwrap() []error   { return e.errs }

// TestNewEvidenceNamesFailedQueries: a failed query is never "ok": the
// operation-level queries a partial error names are in DB.Failed, and
// sources.mysql names every failed query, the steps' included, never with
// an empty reason.
func TestNewEvidenceNamesFailedQueries(t *testing.T) {
	p := &config.Pipeline{Name: "p", Steps: []config.Step{{Name: "debit"}, {Name: "notify"}}}
	badCol := errors.New("Error 1054 (42S22): Unknown column 'x' in 'field list'")
	typo := "debit: evidence query: Error 1054 (42S22): Unknown column 'j.acount_id' in 'field list'"
	withStepErr := DBEvidence{Steps: []StepEvidence{{Name: "debit", Err: typo}, {Name: "notify"}}}
	cases := []struct {
		name   string
		db     DBEvidence
		err    error
		failed []FailedQuery
		mysql  string
	}{
		{"every query answered", DBEvidence{Steps: []StepEvidence{{Name: "debit"}, {Name: "notify"}}}, nil, nil, StatusOK},
		{"a step's evidence query failed", withStepErr, nil, nil, "partial read: " + typo},
		{"the state query failed", DBEvidence{}, namedPartial{[]string{"state"}, []error{badCol}}, []FailedQuery{{Query: QueryState, Err: badCol.Error()}},
			"mysql 127.0.0.1:3306: partial read: state query: " + badCol.Error()},
		{"the state and a step query failed", withStepErr, namedPartial{[]string{"state", "audit"}, []error{badCol, badCol}},
			[]FailedQuery{{Query: QueryState, Err: badCol.Error()}, {Query: QueryAudit, Err: badCol.Error()}},
			"mysql 127.0.0.1:3306: partial read: state query: " + badCol.Error() + "; " + typo},
		{"a partial error that names no query", DBEvidence{}, partialErr{}, []FailedQuery{{Err: "audit query failed"}}, "audit query failed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, err := newEvidence(p, "PAY-1", c.db, c.err)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ev.DB.Failed, c.failed) {
				t.Errorf("failed %+v, want %+v", ev.DB.Failed, c.failed)
			}
			if got := ev.Sources["mysql"]; got != c.mysql {
				t.Errorf("sources.mysql %q, want %q", got, c.mysql)
			}
		})
	}
	if _, err := newEvidence(p, "PAY-1", DBEvidence{}, errors.New("connection refused")); err == nil {
		t.Error("a read that failed whole is not an error")
	}
}

// inconclusive answers every probe with no conclusion.
type inconclusive struct{}

func (inconclusive) Probe(_ context.Context, url string, _, _ []string) ProbeResult {
	return ProbeResult{Outcome: ProbeInconclusive, URL: url, Detail: "HTTP 500"}
}

// TestProbeIsNotASource: a probe's answer, even inconclusive, is recorded
// on its intent or step, not in Sources: it never makes a report partial.
func TestProbeIsNotASource(t *testing.T) {
	p := &config.Pipeline{Name: "p", Topic: "t", Group: "g", MessageKey: "{biz_id}", Steps: []config.Step{
		{Name: "notify", Kind: config.KindRemote, Probe: "http://h/s?request_id={request_id}"},
		{Name: "wms", Kind: config.KindRemote, Probe: "http://h/l?biz_id={biz_id}"},
	}}
	part, off := int32(0), int64(7)
	db := &fakeDB{rows: map[string]DBEvidence{"PAY-1": {
		State: StateRow{Found: true, Status: "LEDGER_DONE", Partition: &part, Offset: &off},
		Steps: []StepEvidence{{Name: "notify", Intents: []Intent{{RequestID: "r-1"}}}, {Name: "wms"}},
	}}}
	c := &Collector{DB: db, Kafka: &fakeKafka{}, Prober: inconclusive{}, Timeout: time.Second}
	ev, err := c.Collect(context.Background(), p, "PAY-1")
	if err != nil {
		t.Fatal(err)
	}
	if in := ev.DB.Steps[0].Intents[0].Probe; in == nil || in.Outcome != ProbeInconclusive {
		t.Errorf("intent probe %+v, want the inconclusive answer", in)
	}
	if bp := ev.DB.Steps[1].BizProbe; bp == nil || bp.Outcome != ProbeInconclusive {
		t.Errorf("biz probe %+v, want the inconclusive answer", bp)
	}
	want := map[string]string{"mysql": StatusOK, "kafka": StatusOK}
	if !reflect.DeepEqual(ev.Sources, want) {
		t.Errorf("sources %v, want %v", ev.Sources, want)
	}
}

// partKafka answers the group view with the given error (a partial one
// comes with the fields it read) and locates at the stored position, or
// fails to.
type partKafka struct {
	groupErr  error
	locateErr error
}

func (k partKafka) Group(context.Context, string, string) (GroupView, error) {
	g := GroupView{Partitions: map[int32]PartitionView{0: {Committed: 5, LogEnd: 9}}}
	var pe *PartialKafkaError
	switch {
	case k.groupErr == nil:
	case errors.As(k.groupErr, &pe):
		g.Unknown = pe.Unknown
	default:
		return GroupView{}, k.groupErr
	}
	return g, k.groupErr
}

func (k partKafka) Locate(_ context.Context, req LocateRequest) (Location, error) {
	if k.locateErr != nil {
		return Location{Partition: -1, Offset: -1, Located: LocatedUnknown}, k.locateErr
	}
	return Location{Partition: req.Partition, Offset: req.Offset, Located: LocatedStored}, nil
}

// TestCollectKeepsWhatKafkaAnswered: a failed part of the Kafka read
// loses only its own fields: a partial group view is kept with its unknown
// fields, the message position is kept when the group view failed, and the
// group view when the locate failed; sources.kafka names every failure.
// Before, any failure discarded the whole Kafka view.
func TestCollectKeepsWhatKafkaAnswered(t *testing.T) {
	p := &config.Pipeline{Name: "p", Topic: "t", Group: "g", MessageKey: "{biz_id}"}
	part, off := int32(0), int64(7)
	db := &fakeDB{rows: map[string]DBEvidence{"PAY-1": {State: StateRow{Found: true, Status: "DONE", Partition: &part, Offset: &off}}}}
	partial := &PartialKafkaError{Unknown: []UnknownField{{Field: FieldGroup, Why: "describe group: unsupported"}}}
	for _, tc := range []struct {
		name        string
		k           partKafka
		group, spot bool
		source      string
	}{
		{"all read", partKafka{}, true, true, StatusOK},
		{"group partly read", partKafka{groupErr: partial}, true, true, "partial read: group_state unknown (describe group: unsupported)"},
		{"group failed", partKafka{groupErr: errors.New("coordinator down")}, false, true, "coordinator down"},
		{"locate failed", partKafka{locateErr: errors.New("fetch failed")}, true, false, "fetch failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Collector{DB: db, Kafka: tc.k, Timeout: time.Second}
			ev, err := c.Collect(context.Background(), p, "PAY-1")
			if err != nil {
				t.Fatal(err)
			}
			if got := len(ev.Kafka.Group.Partitions) > 0; got != tc.group {
				t.Errorf("group view kept: %v, want %v", got, tc.group)
			}
			if got := ev.Kafka.Offset == off; got != tc.spot {
				t.Errorf("position kept: %v (offset %d), want %v", got, ev.Kafka.Offset, tc.spot)
			}
			if ev.Sources["kafka"] != tc.source {
				t.Errorf("sources.kafka %q, want %q", ev.Sources["kafka"], tc.source)
			}
		})
	}
}
