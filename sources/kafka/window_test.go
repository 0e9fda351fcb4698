package kafka_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/sources"
)

// A producer whose clock runs 30 minutes ahead wrote a record of the same
// key (another event of the order) right before the operation's message:
// its timestamp is past the window's end, but the records after it are
// inside the window, so the search goes on and finds the message.
func TestLocateFutureTimestampDoesNotEndTheSearch(t *testing.T) {
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		// ahead writes the records stamped in the future before the message.
		ahead int
		// stamp is the message's own timestamp.
		stamp time.Time
	}{
		{"one record of the key 30m ahead", 1, at.Add(30 * time.Second)},
		{"a burst of 15 records 30m ahead", 15, at.Add(30 * time.Second)},
		{"the message itself 30m ahead", 0, at.Add(30 * time.Minute)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, r := setup(t)
			noise(t, k, 0, at.Add(-10*time.Minute), at)
			k.Produce(t, topic, 0, "ORDER-1", "SHIPPED", map[string]string{"msg_id": "m-shipped"}, at.Add(30*time.Minute))
			for i := 1; i < tc.ahead; i++ {
				k.Produce(t, topic, 0, fmt.Sprint("SKEWED-", i), "v", nil, at.Add(30*time.Minute))
			}
			paid := k.Produce(t, topic, 0, "ORDER-1", "PAID", map[string]string{"msg_id": "m-paid"}, tc.stamp)
			noise(t, k, 0, at.Add(time.Minute), at.Add(20*time.Minute))

			loc, err := r.Locate(context.Background(), sources.LocateRequest{
				Topic: topic, Key: []byte("ORDER-1"), MsgID: "m-paid", Partition: 0, Offset: -1, Around: at,
			})
			if err != nil {
				t.Fatal(err)
			}
			if loc.Located != sources.LocatedSearched || loc.Offset != paid || loc.Message == nil || string(loc.Message.Value) != "PAID" {
				t.Fatalf("location = %+v (message at %d)", loc, paid)
			}
		})
	}
}

// The window still ends: 16 records in a row stamped after it (a whole
// burst of a skewed producer, or the log past the window) end the search,
// and so does the record limit, future records or not.
func TestLocateWindowEndAndLimitWithFutureRecords(t *testing.T) {
	k, r := setup(t)
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	noise(t, k, 0, at.Add(-10*time.Minute), at) // 10 in the window, from at−5m
	first := k.Produce(t, topic, 0, "ORDER-1", "SHIPPED", map[string]string{"msg_id": "m-shipped"}, at.Add(30*time.Minute))
	for i := 1; i < 16; i++ {
		k.Produce(t, topic, 0, fmt.Sprint("SKEWED-", i), "v", nil, at.Add(30*time.Minute))
	}
	paid := k.Produce(t, topic, 0, "ORDER-1", "PAID", map[string]string{"msg_id": "m-paid"}, at.Add(30*time.Second))
	ctx := context.Background()
	req := sources.LocateRequest{Topic: topic, Key: []byte("ORDER-1"), MsgID: "m-paid", Partition: 0, Offset: -1, Around: at}
	loc, err := r.Locate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if loc.Located != sources.LocatedUnknown || !strings.HasSuffix(loc.Detail, fmt.Sprintf("(5m0s after the operation) from offset %d on", first)) ||
		!strings.HasPrefix(loc.Detail, "not found: scanned 26 records") {
		t.Errorf("16 records stamped past the window: %+v (message at %d)", loc, paid)
	}

	// With 15 of them the message is found (above), unless the limit is
	// reached first.
	req.Key, req.MsgID = []byte("PAY-404"), ""
	req.Limit = 12
	loc, err = r.Locate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if loc.Located != sources.LocatedUnknown || !strings.HasPrefix(loc.Detail, "not found: scanned 12 records") || !strings.HasSuffix(loc.Detail, "stopped: limit of 12 records reached") {
		t.Errorf("limit: %+v", loc)
	}
}

// An operation no row anchors (seed 000's own schema) is searched anchored
// at now among the newest records: the search starts at the later of the
// window's start and the log end less the limit, so a recent message is
// found however long the window, and an older one beyond the limit is
// not found, the detail saying how far the search read.
func TestLocateNewest(t *testing.T) {
	k, r := setup(t)
	now := time.Date(2025, 3, 2, 10, 0, 0, 0, time.UTC)
	old := k.Produce(t, topic, 0, "PAY-OLD", "v", nil, now.Add(-3*time.Hour))
	noise(t, k, 0, now.Add(-2*time.Hour), now.Add(-time.Hour))
	recent := k.Produce(t, topic, 0, "PAY-NEW", "v", nil, now.Add(-30*time.Minute))
	noise(t, k, 0, now.Add(-5*time.Minute), now.Add(-time.Minute))
	ctx := context.Background()
	req := sources.LocateRequest{Topic: topic, Key: []byte("PAY-NEW"), Partition: 0, Offset: -1, Around: now,
		Window: 24 * time.Hour, Limit: 12, Newest: true}
	loc, err := r.Locate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if loc.Located != sources.LocatedSearched || loc.Offset != recent || !strings.Contains(loc.Detail, "the newest 12 records") {
		t.Fatalf("recent: %+v (message at %d)", loc, recent)
	}
	req.Key = []byte("PAY-OLD")
	loc, err = r.Locate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if loc.Located != sources.LocatedUnknown || !strings.HasPrefix(loc.Detail, "not found: scanned") || !strings.Contains(loc.Detail, "the newest 12 records") {
		t.Fatalf("beyond the limit: %+v (message at %d)", loc, old)
	}
	// Without Newest the same window is read from its start: the old one
	// is found first.
	req.Newest = false
	if loc, err = r.Locate(ctx, req); err != nil || loc.Offset != old {
		t.Fatalf("from the window's start: %+v, %v (message at %d)", loc, err, old)
	}
}
