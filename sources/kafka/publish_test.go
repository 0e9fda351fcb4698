package kafka_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
)

// FindPublished finds a record by its headers from an offset on, and only
// from there; LogEnd is where the next record goes.
func TestFindPublished(t *testing.T) {
	k := testenv.NewKafka(t, map[string]int32{topic: 4})
	r := newReader(t, k.Brokers, 5*time.Second)
	ctx := context.Background()
	end, err := r.LogEnd(ctx, topic, 1)
	if err != nil || end != 0 {
		t.Fatalf("log end of an empty partition: %d %v", end, err)
	}
	if _, found, err := r.FindPublished(ctx, topic, 1, 0, map[string]string{"opctl-plan": "p1"}); found || err != nil {
		t.Fatalf("an empty partition: found %v, %v", found, err)
	}
	for i := range 5 {
		k.Produce(t, topic, 1, "noise", "{}", map[string]string{"msg_id": "n"}, time.Time{})
		if i == 2 {
			if _, _, err := r.Publish(ctx, topic, 1, []byte("PAY-1"), []byte("v"), map[string]string{"msg_id": "m-1", "opctl-plan": "p1"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if end, err := r.LogEnd(ctx, topic, 1); err != nil || end != 6 {
		t.Fatalf("log end: %d %v, want 6", end, err)
	}
	for _, c := range []struct {
		from  int64
		match map[string]string
		off   int64
		found bool
	}{
		{0, map[string]string{"opctl-plan": "p1", "msg_id": "m-1"}, 3, true},
		{3, map[string]string{"opctl-plan": "p1"}, 3, true},
		{4, map[string]string{"opctl-plan": "p1"}, -1, false}, // before from: not this send's
		{0, map[string]string{"opctl-plan": "p1", "msg_id": "m-2"}, -1, false},
		{0, map[string]string{"opctl-plan": "p2"}, -1, false},
		{99, map[string]string{"opctl-plan": "p1"}, -1, false}, // past the end
	} {
		off, found, err := r.FindPublished(ctx, topic, 1, c.from, c.match)
		if err != nil || found != c.found || off != c.off {
			t.Errorf("from %d %v: %d %v %v, want %d %v", c.from, c.match, off, found, err, c.off, c.found)
		}
	}
}

// Kafka that stops answering during a publish: Publish returns within the
// reader's timeout with an error saying the record may have been written
// (Kafka unreachable, the outcome unknown), Close does not wait for the
// abandoned request, and once Kafka answers again the record is there
// exactly once: the producer never sends it a second time by itself.
func TestPublishToFrozenKafka(t *testing.T) {
	k, fz := testenv.NewFreezableKafka(t, map[string]int32{topic: 4})
	const timeout = 2 * time.Second
	r := newReader(t, k.Brokers, timeout)
	ctx := context.Background()
	if _, _, err := r.Publish(ctx, topic, 0, []byte("warm"), []byte("up"), nil); err != nil {
		t.Fatal(err) // connections and metadata in place
	}
	end, err := r.LogEnd(ctx, topic, 0)
	if err != nil {
		t.Fatal(err)
	}

	fz.Freeze()
	start := time.Now()
	_, _, err = r.Publish(ctx, topic, 0, []byte("PAY-1"), []byte("v"), map[string]string{"opctl-plan": "frozen"})
	took := time.Since(start)
	var se *sources.SendError
	if !errors.As(err, &se) || !se.MayHaveSent || !se.Unreachable || se.ExitCode() != sources.ExitPartial {
		t.Fatalf("publish to a frozen Kafka: %#v", err)
	}
	closed := make(chan time.Duration, 1)
	go func() {
		s := time.Now()
		_ = r.Close()
		closed <- time.Since(s)
	}()
	var closeTook time.Duration
	select {
	case closeTook = <-closed:
	case <-time.After(4 * timeout):
		t.Fatalf("Close still waits on the abandoned request after %s", 4*timeout)
	}
	if took > timeout+time.Second {
		t.Errorf("Publish took %s, the timeout is %s", took, timeout)
	}
	t.Logf("frozen: Publish returned after %s (timeout %s), Close after %s", took.Round(time.Millisecond), timeout, closeTook.Round(time.Millisecond))

	fz.Thaw()
	r2 := newReader(t, k.Brokers, 5*time.Second)
	var n int
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		// The held request reaches the broker after the thaw; give a
		// retry (there must be none) every chance to land too.
		time.Sleep(500 * time.Millisecond)
		n = 0
		from := end
		for {
			off, found, err := r2.FindPublished(ctx, topic, 0, from, map[string]string{"opctl-plan": "frozen"})
			if err != nil {
				t.Fatal(err)
			}
			if !found {
				break
			}
			n++
			from = off + 1
		}
		if e, _ := r2.LogEnd(ctx, topic, 0); e >= end+1 && time.Since(start) > 3*timeout {
			break
		}
	}
	if n > 1 {
		t.Fatalf("the record exists %d times after Kafka answered again", n)
	}
	t.Logf("after the thaw: the record exists %d time(s)", n)
}

// An unreachable broker: nothing left the process, so the send did not
// happen (not unknown), and it says Kafka unreachable.
func TestPublishUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := newReader(t, []string{addr}, time.Second)
	_, _, err = r.Publish(context.Background(), topic, 0, []byte("k"), []byte("v"), nil)
	var se *sources.SendError
	if !errors.As(err, &se) || se.MayHaveSent || !se.Unreachable {
		t.Fatalf("publish to a closed port: %#v", err)
	}
	if _, err := r.LogEnd(context.Background(), topic, 0); !errors.As(err, &se) || !se.Unreachable {
		t.Fatalf("log end from a closed port: %v", err)
	}
}
