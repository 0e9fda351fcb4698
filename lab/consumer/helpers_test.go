package consumer

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/lab/testenv"
)

// fakeService is a tiny stand-in for a lab/downstream service: POST /call
// applies a (non-idempotent) effect, GET /status?request_id= and GET
// /effects?biz_id= report them. delayNext makes the next call of a biz id
// apply its effect and then answer late; holdNext makes it apply its effect
// and answer only once the test releases it.
type fakeService struct {
	srv *httptest.Server

	mu      sync.Mutex
	byBiz   map[string]int
	byReq   map[string]int
	delays  map[string]time.Duration
	holds   map[string]chan struct{}
	applied chan string // biz ids, as effects are applied
}

func newFakeService(t *testing.T) *fakeService {
	s := &fakeService{byBiz: map[string]int{}, byReq: map[string]int{}, delays: map[string]time.Duration{},
		holds: map[string]chan struct{}{}, applied: make(chan string, 100)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /call", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			RequestID string          `json:"request_id"`
			BizID     string          `json:"biz_id"`
			Payload   json.RawMessage `json:"payload"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.RequestID == "" || req.BizID == "" {
			http.Error(w, `{"status":"BAD_REQUEST"}`, http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.byBiz[req.BizID]++
		s.byReq[req.RequestID]++
		n := s.byBiz[req.BizID]
		d := s.delays[req.BizID]
		delete(s.delays, req.BizID)
		hold := s.holds[req.BizID]
		delete(s.holds, req.BizID)
		s.mu.Unlock()
		select {
		case s.applied <- req.BizID:
		default:
		}
		if d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"APPLIED","effect_id":%d}`, n)
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		n := s.byReq[r.URL.Query().Get("request_id")]
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if n == 0 {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"status":"NOT_FOUND"}`)
			return
		}
		fmt.Fprint(w, `{"status":"APPLIED"}`)
	})
	mux.HandleFunc("GET /effects", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"count":%d}`, s.count(r.URL.Query().Get("biz_id")))
	})
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *fakeService) delayNext(bizID string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delays[bizID] = d
}

// holdNext makes the next call of bizID apply its effect and then wait for
// release (or for the caller to give up) before it answers. release may be
// called more than once; the test's end calls it too, so that no handler
// outlives the server.
func (s *fakeService) holdNext(t *testing.T, bizID string) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.holds[bizID] = ch
	s.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(release)
	return release
}

func (s *fakeService) count(bizID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byBiz[bizID]
}

// recorder keeps every event of a lab's consumers.
type recorder struct {
	mu      sync.Mutex
	evs     []Event
	changed chan struct{}
}

func newRecorder(t *testing.T) (*recorder, chan Event) {
	ch := make(chan Event, 10000)
	r := &recorder{changed: make(chan struct{})}
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case ev := <-ch:
				r.mu.Lock()
				r.evs = append(r.evs, ev)
				close(r.changed)
				r.changed = make(chan struct{})
				r.mu.Unlock()
			case <-stop:
				return
			}
		}
	}()
	t.Cleanup(func() { close(stop) })
	return r, ch
}

// wait returns the first event matching pred, waiting for it until ctx ends
// (then the test fails with every event seen).
func (r *recorder) wait(t *testing.T, ctx context.Context, what string, pred func(Event) bool) Event {
	t.Helper()
	for {
		r.mu.Lock()
		for _, ev := range r.evs {
			if pred(ev) {
				r.mu.Unlock()
				return ev
			}
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v\nevents:\n%s", what, ctx.Err(), r.dump())
		}
	}
}

// waitFor waits for an event What of bizID.
func (r *recorder) waitFor(t *testing.T, ctx context.Context, bizID, what string) Event {
	t.Helper()
	return r.wait(t, ctx, bizID+" "+what, func(ev Event) bool { return ev.BizID == bizID && ev.What == what })
}

func (r *recorder) count(pred func(Event) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ev := range r.evs {
		if pred(ev) {
			n++
		}
	}
	return n
}

func (r *recorder) dump() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var sb strings.Builder
	for _, ev := range r.evs {
		fmt.Fprintf(&sb, "  %s %-8s %-16s %-8s %-14s p%d@%d %s\n", ev.At.Format("15:04:05.000"), ev.Consumer, ev.BizID, ev.Step, ev.What, ev.Partition, ev.Offset, ev.Detail)
	}
	return sb.String()
}

// lab is one test's world: a fresh database with lab/schema.sql, a kfake
// cluster with one topic, the four fake services, a producer and a recorder.
type lab struct {
	t      *testing.T
	ctx    context.Context
	db     *sql.DB
	kafka  *testenv.Kafka
	topic  string
	group  string
	notify *fakeService
	wms    *fakeService
	logi   *fakeService
	points *fakeService
	prod   sarama.SyncProducer
	rec    *recorder
	events chan Event
}

func newLab(t *testing.T, partitions int32) *lab {
	t.Helper()
	return newLabOn(t, partitions, "../schema.sql")
}

// newLabOn is newLab on another schema file (a seed's own: ../schema_seed001.sql).
func newLabOn(t *testing.T, partitions int32, schema string) *lab {
	t.Helper()
	db := testenv.MySQL(t)
	db.ExecFile(t, schema)
	l := &lab{t: t, db: db.SQL, topic: "lab-topic", group: "lab-group"}
	l.kafka = testenv.NewKafka(t, map[string]int32{l.topic: partitions})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	l.ctx = ctx
	l.notify, l.wms, l.logi, l.points = newFakeService(t), newFakeService(t), newFakeService(t), newFakeService(t)
	p, err := sarama.NewSyncProducer(l.kafka.Brokers, ProducerConfig("test-producer"))
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	l.prod = p
	l.rec, l.events = newRecorder(t)
	return l
}

func (l *lab) urls() URLs {
	return URLs{Notify: l.notify.srv.URL, WMS: l.wms.srv.URL, Logistics: l.logi.srv.URL, Points: l.points.srv.URL}
}

// start starts a consumer of the lab's topic and group, with FastTimings
// (tune may change them); it is killed when the test ends.
func (l *lab) start(kind Kind, design Design, clientID string, f *Faults, tune func(*Config)) *Consumer {
	l.t.Helper()
	cfg := Config{Kind: kind, Design: design, Topic: l.topic, Group: l.group, ClientID: clientID,
		Brokers: l.kafka.Brokers, DB: l.db, Services: l.urls(), RPCTimeout: 500 * time.Millisecond,
		LeaseTTL: 30 * time.Second, Timings: FastTimings(), Faults: f, Events: l.events}
	if tune != nil {
		tune(&cfg)
	}
	c, err := Start(l.ctx, cfg)
	if err != nil {
		l.t.Fatalf("start %s: %v", clientID, err)
	}
	l.t.Cleanup(c.Kill)
	return c
}

func (l *lab) produce(m Message) (int32, int64) {
	l.t.Helper()
	p, off, err := ProduceMessage(l.prod, l.topic, m)
	if err != nil {
		l.t.Fatalf("produce %s: %v", m.BizID, err)
	}
	return p, off
}

// committed is the group's committed offset on partition (-1 when none).
func (l *lab) committed(partition int32) int64 {
	l.t.Helper()
	admin, err := sarama.NewClusterAdmin(l.kafka.Brokers, l.kafka.Config("test-admin"))
	if err != nil {
		l.t.Fatalf("admin: %v", err)
	}
	defer admin.Close()
	resp, err := admin.ListConsumerGroupOffsets(l.group, map[string][]int32{l.topic: {partition}})
	if err != nil {
		l.t.Fatalf("list offsets: %v", err)
	}
	b := resp.GetBlock(l.topic, partition)
	if b == nil {
		return -1
	}
	return b.Offset
}

func (l *lab) exec(q string, args ...any) {
	l.t.Helper()
	if _, err := l.db.Exec(q, args...); err != nil {
		l.t.Fatalf("%s: %v", q, err)
	}
}

func (l *lab) count(q string, args ...any) int {
	l.t.Helper()
	var n int
	if err := l.db.QueryRow(q, args...).Scan(&n); err != nil {
		l.t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (l *lab) str(q string, args ...any) string {
	l.t.Helper()
	var s sql.NullString
	if err := l.db.QueryRow(q, args...).Scan(&s); err != nil {
		l.t.Fatalf("%s: %v", q, err)
	}
	if !s.Valid {
		return "NULL"
	}
	return s.String
}

// want compares got with want, naming what.
func (l *lab) want(what string, got, want any) {
	l.t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		l.t.Errorf("%s = %v, want %v", what, got, want)
	}
}
