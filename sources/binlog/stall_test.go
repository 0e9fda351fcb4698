package binlog

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
)

// hangLimit is how long a read through a stalled proxy may take before the
// test calls it hung: far past its timeout (a bound on a hang, not a
// measure of speed).
const hangLimit = 15 * time.Second

// within runs fn and fails the test if it has not returned after limit
// (the read hangs), returning how long it took otherwise.
func within(t *testing.T, limit time.Duration, what string, fn func() error) (error, time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err, time.Since(start)
	case <-time.After(limit):
		t.Fatalf("%s did not return within %s: it hangs", what, limit)
		return nil, 0
	}
}

// A server that accepts the connection and stops answering — during the
// handshake, the first queries, a file probe or the dump — ends the read
// with an error once the reader's timeout passes; it never hangs (it hung
// forever before, go-mysql's Conn.Execute having no deadline).
func TestStalledServer(t *testing.T) {
	f := newFixture(t)
	f.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES ('T-1', 100)")
	f.debit(t, "T-1", "30", "PAY-T", true)
	f.debit(t, "T-1", "30", "PAY-T", true)
	req := f.request("T-1")
	target := strings.SplitN(strings.SplitN(f.db.DSN, "tcp(", 2)[1], ")", 2)[0]
	dsnVia := func(addr string) string { return strings.Replace(f.db.DSN, target, addr, 1) }

	// Through a proxy that forwards everything, the read is whole.
	whole := testenv.NewStallProxy(t, target, -1)
	r, err := New(dsnVia(whole.Addr), 0, 10*time.Second)
	testenv.Must(t, err, "reader")
	read, err := r.Changes(context.Background(), req)
	if err != nil || len(read.Changes) != 2 {
		t.Fatalf("through the proxy: err %v, %d changes", err, len(read.Changes))
	}

	const timeout = 700 * time.Millisecond
	// Each connection's answer is cut after that many bytes: from the
	// greeting's first bytes, through the queries of the SQL connection
	// (about 2.3 kB in all), to the probes' and the dump's (longer).
	points := map[string]bool{}
	for _, b := range []int{0, 1, 4, 30, 90, 200, 400, 800, 1200, 1600, 2000, 2400, 2800, 3200, 4000, 5000, 6000} {
		p := testenv.NewStallProxy(t, target, b)
		r, err := New(dsnVia(p.Addr), 0, timeout)
		testenv.Must(t, err, "reader")
		err, took := within(t, hangLimit, "a stalled read", func() error {
			_, err := r.Changes(context.Background(), req)
			return err
		})
		p.Close()
		if err == nil {
			continue // the answers are all shorter than that
		}
		if !strings.Contains(err.Error(), "no answer within the 700ms timeout") {
			t.Errorf("stalled after %d bytes: %v; want the timeout named", b, err)
		}
		for _, where := range []string{"connect as", "read the binlog settings", "read the columns", "SHOW BINARY LOGS", "replica connection", "read bin."} {
			if strings.Contains(err.Error(), where) {
				points[where] = true
			}
		}
		t.Logf("stalled after %5d bytes: %s after %s", b, err, took.Round(time.Millisecond))
	}
	for _, where := range []string{"connect as", "read the binlog settings", "read the columns", "read bin."} {
		if !points[where] {
			t.Errorf("no budget stalled the read at %q: %v", where, points)
		}
	}

	// doctor's read of the oldest binlog, stalled.
	p := testenv.NewStallProxy(t, target, 120)
	r, err = New(dsnVia(p.Addr), 0, timeout)
	testenv.Must(t, err, "reader")
	err, _ = within(t, hangLimit, "Oldest", func() error { _, err := r.Oldest(context.Background()); return err })
	if err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("Oldest through a stalled server: %v", err)
	}
}

// An interrupt (the context cancelled) ends a stalled read at once, with
// context.Canceled, whatever the timeout.
func TestStalledServerInterrupted(t *testing.T) {
	f := newFixture(t)
	target := strings.SplitN(strings.SplitN(f.db.DSN, "tcp(", 2)[1], ")", 2)[0]
	for _, budget := range []int{0, 200, 3000} {
		p := testenv.NewStallProxy(t, target, budget)
		r, err := New(strings.Replace(f.db.DSN, target, p.Addr, 1), 0, time.Hour)
		testenv.Must(t, err, "reader")
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		err, took := within(t, hangLimit, "an interrupted read", func() error {
			_, err := r.Changes(ctx, f.request("X"))
			return err
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("budget %d: err %v, want context.Canceled", budget, err)
		}
		t.Logf("budget %d: interrupted after %s", budget, took.Round(time.Millisecond))
	}
}
