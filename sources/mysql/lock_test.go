package mysql_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/mysql"
	"github.com/opctl-dev/opctl/sources/schema"
)

func openWriter(t *testing.T, dsn string, timeout time.Duration) *mysql.Writer {
	t.Helper()
	w, err := mysql.OpenWriter(dsn, timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// The write path's lock: one holder at a time across connections (two
// writers stand for two processes); a second asker is refused at once
// naming the holder, or waits and gets it when it is released; a released
// lock's connection never goes back to the pool holding it; a lock whose
// connection the server killed is reported lost.
func TestWriterLock(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	a := openWriter(t, db.DSN, 5*time.Second)
	b := openWriter(t, db.DSN, 5*time.Second)
	ctx := context.Background()
	name := "opctl-test-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + db.Name

	if _, err := a.Lock(ctx, strings.Repeat("x", 65), 0); err == nil {
		t.Fatal("a 65-byte lock name was taken")
	}
	la, err := a.Lock(ctx, name, 0)
	if err != nil {
		t.Fatal(err)
	}
	if la.Contended() != "" || la.Name() != name {
		t.Fatalf("a free lock: contended %q name %q", la.Contended(), la.Name())
	}
	_, err = b.Lock(ctx, name, 0)
	var held *sources.LockHeldError
	if !errors.As(err, &held) || held.Holder.Connection == 0 || held.Holder.User == "" || held.ExitCode() != sources.ExitRefused {
		t.Fatalf("second lock: %#v", err)
	}
	if !strings.Contains(err.Error(), "MySQL connection") || !strings.Contains(err.Error(), held.Holder.User+"@") {
		t.Fatalf("the refusal does not name the holder: %v", err)
	}
	// A wait ends when the holder releases.
	go func() { time.Sleep(300 * time.Millisecond); _ = la.Release() }()
	start := time.Now()
	lb, err := b.Lock(ctx, name, 3*time.Second)
	if err != nil {
		t.Fatalf("waited lock: %v", err)
	}
	if lb.Contended() == "" || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("the waited lock says it was free (contended %q after %s)", lb.Contended(), time.Since(start))
	}
	if err := la.Release(); err != nil {
		t.Fatalf("a second release: %v", err)
	}
	// A wait that ends without it.
	_, err = a.Lock(ctx, name, 500*time.Millisecond)
	if !errors.As(err, &held) || held.Waited < 400*time.Millisecond {
		t.Fatalf("a wait that times out: %#v", err)
	}
	if err := lb.Release(); err != nil {
		t.Fatal(err)
	}
	var used *int64
	if err := db.SQL.QueryRow("SELECT IS_USED_LOCK(?)", name).Scan(&used); err != nil || used != nil {
		t.Fatalf("after release the lock is held by connection %v (%v)", used, err)
	}

	// Killed by the server: lost.
	lc, err := a.Lock(ctx, name, 0)
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := db.SQL.QueryRow("SELECT IS_USED_LOCK(?)", name).Scan(&id); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, "KILL ?", id)
	select {
	case <-lc.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("a killed lock connection was not reported lost")
	}
	_ = lc.Release()
	// The pool still works after the killed connection.
	ld, err := a.Lock(ctx, name, time.Second)
	if err != nil {
		t.Fatalf("lock after a kill: %v", err)
	}
	_ = ld.Release()
}

// An interrupted wait for a lock returns at once with the context's error.
func TestWriterLockInterrupted(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	a := openWriter(t, db.DSN, 10*time.Second)
	b := openWriter(t, db.DSN, 10*time.Second)
	name := "opctl-test-int-" + db.Name
	la, err := a.Lock(context.Background(), name, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(300 * time.Millisecond); cancel() }()
	start := time.Now()
	_, err = b.Lock(ctx, name, 8*time.Second)
	if !errors.Is(err, context.Canceled) || time.Since(start) > 3*time.Second {
		t.Fatalf("interrupted wait: %v after %s", err, time.Since(start))
	}
}

// The lease of an action in flight: TouchAudit renews only the owner's row
// in that outcome; ClaimAudit takes a row over only if nobody renewed it
// since it was read; AuditDone reads the clock and the in-flight image.
func TestAuditLease(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	for _, s := range schema.AuditDDL("") {
		db.Exec(t, s)
	}
	w := openWriter(t, db.DSN, 5*time.Second)
	ctx := context.Background()
	plan := strings.Repeat("a", 64)
	db.Exec(t, `INSERT INTO opctl_audit (plan_id, action_index, biz_id, pipeline, action, operator, reason, outcome, after_image, created_at, updated_at)
		VALUES (?, 1, 'B', 'p', 'compensate_remote', 'o', 'r', 'compensating', '{"owner":"me","lease_ms":3000}', NOW(6) - INTERVAL 1 MINUTE, NOW(6) - INTERVAL 1 MINUTE),
		       (?, 2, 'B', 'p', 'reverse', 'o', 'r', 'applied', '{"plan":{}}', NOW(6), NOW(6))`, plan, plan)
	rows, err := w.AuditDone(ctx, "opctl_audit", plan)
	if err != nil || len(rows) != 2 {
		t.Fatalf("audit done: %v %+v", err, rows)
	}
	i := slices.IndexFunc(rows, func(r sources.AuditDone) bool { return r.ActionIndex == 1 })
	r1, r2 := rows[i], rows[1-i]
	if age := r1.Now.Sub(r1.UpdatedAt); age < 59*time.Second || age > 2*time.Minute {
		t.Fatalf("in-flight row's age by the database clock: %s", age)
	}
	var img map[string]any
	if err := json.Unmarshal(r1.After, &img); err != nil || img["owner"] != "me" || r2.After != nil {
		t.Fatalf("images: %s / %s", r1.After, r2.After)
	}
	if ok, err := w.TouchAudit(ctx, "opctl_audit", plan, 1, "compensating", "someone else"); ok || err != nil {
		t.Fatalf("another owner renewed the lease: %v %v", ok, err)
	}
	if ok, err := w.TouchAudit(ctx, "opctl_audit", plan, 1, "compensating", "me"); !ok || err != nil {
		t.Fatalf("the owner could not renew: %v %v", ok, err)
	}
	// Renewed since r1 was read: the claim must fail.
	if ok, err := w.ClaimAudit(ctx, "opctl_audit", plan, 1, "compensating", r1.UpdatedAt, json.RawMessage(`{"owner":"thief"}`)); ok || err != nil {
		t.Fatalf("claimed a renewed row: %v %v", ok, err)
	}
	rows, _ = w.AuditDone(ctx, "opctl_audit", plan)
	i = slices.IndexFunc(rows, func(r sources.AuditDone) bool { return r.ActionIndex == 1 })
	if ok, err := w.ClaimAudit(ctx, "opctl_audit", plan, 1, "compensating", rows[i].UpdatedAt, json.RawMessage(`{"owner":"next"}`)); !ok || err != nil {
		t.Fatalf("could not claim the row as read: %v %v", ok, err)
	}
	if ok, _ := w.TouchAudit(ctx, "opctl_audit", plan, 1, "compensating", "me"); ok {
		t.Fatal("the old owner still renews a claimed row")
	}
}

// A write DSN on a read-only server (a replica): ReadOnly names the
// variables that are ON, and doctor's grants facts carry them.
func TestReadOnlyServer(t *testing.T) {
	t.Parallel()
	srv := testenv.BinlogServerFor(t, testenv.BinlogOptions{NoBinlog: true, Args: []string{"--read-only"}})
	db := srv.MySQL(t)
	w := openWriter(t, db.DSN, 5*time.Second)
	on, err := w.ReadOnly(context.Background())
	if err != nil || !slices.Contains(on, "read_only") {
		t.Fatalf("read-only server: %v %v", on, err)
	}
	if g := w.Grants(context.Background()); !slices.Contains(g.ReadOnly, "read_only") || g.ReadOnlyErr != "" {
		t.Fatalf("grants facts: %+v", g)
	}
	// The machine's own server is writable.
	mine := openWriter(t, testenv.MySQL(t).DSN, 5*time.Second)
	if on, err := mine.ReadOnly(context.Background()); err != nil || len(on) != 0 {
		t.Fatalf("the shared server: %v %v", on, err)
	}
}
