package sources

import (
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
	// Nothing to anchor a search: no request.
	if _, ok := c.locateRequest(p, "7", DBEvidence{}); ok {
		t.Fatal("a search without any row")
	}
	// A record without a timestamp: the request carries no time, so the
	// reader reports the position unknown instead of scanning from the head.
	req, ok = c.locateRequest(p, "7", DBEvidence{Idempotency: []IdempotencyRow{{Key: "m-5", Action: "PENDING"}}})
	if !ok || !req.Around.IsZero() {
		t.Fatalf("no timestamp: %+v", req)
	}
}
