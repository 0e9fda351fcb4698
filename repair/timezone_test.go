package repair

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources/connect"
	"github.com/opctl-dev/opctl/sources/probe"
)

// tzChild marks the run of TestVerdictsIgnoreTheDSNTimeZone that
// TestVerdictsIgnoreTheDSNTimeZoneInShanghai starts under TZ=Asia/Shanghai.
const tzChild = "OPCTL_TEST_TZ_CHILD"

// withConfig is e on new clients and a new Service for a changed copy of
// its configuration (the same database and cluster).
func (e *tenv) withConfig(change func(c *tenv)) *tenv {
	e.t.Helper()
	cfg := *e.cfg
	c := &tenv{t: e.t, db: e.db, k: e.k, cfg: &cfg, parts: e.parts}
	change(c)
	cl, err := connect.Open(c.cfg, connect.Options{Timeout: 5 * time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cl.Close() })
	cl.Collector.Prober = probe.New(2 * time.Second)
	c.cl, c.svc = cl, newService(cl)
	c.svc.Prober, c.svc.Poster = probe.New(2*time.Second), probe.New(2*time.Second)
	return c
}

// TestVerdictsIgnoreTheDSNTimeZone: the DSN's time_zone or loc never move
// a lease or the instant a DATETIME stands for (docs/config.md#mysql): the
// same rows give the same verdicts with each DSN, the message is found by
// its created_at, and a live lease refuses every repair. Before, with
// time_zone='+08:00' a live lease read as expired (TZ-1: STATE_BEHIND,
// planned and applied while its consumer ran), with '-08:00' an expired one
// as live (PAY-7: IN_FLIGHT), and with loc=Local in Shanghai created_at
// was 8 hours off and the search missed the message (PAY-3: INCOMPLETE).
func TestVerdictsIgnoreTheDSNTimeZone(t *testing.T) {
	if os.Getenv(tzChild) != "" {
		// The loc=Local case below is the operator's zone only if it is not UTC.
		if _, off := time.Now().Zone(); off != 8*3600 {
			t.Fatalf("TZ=%s gives the local offset %d, want +08:00", os.Getenv("TZ"), off)
		}
	}
	e := settlementEnv(t)
	// TZ-1: a live consumer half-way: its lease runs for an hour, it wrote
	// the ledger row and has not advanced the state yet.
	e.db.Exec(t, "INSERT INTO account_balance VALUES (1101, 990.00)")
	e.db.Exec(t, "INSERT INTO biz_operation (biz_id, status, version, owner, lease_until, msg_id, created_at, updated_at) VALUES "+
		"('TZ-1', 'DEBIT_DONE', 2, 'c-5', NOW(3) + INTERVAL 1 HOUR, 'm-tz1', NOW(3) - INTERVAL 2 MINUTE, NOW(3) - INTERVAL 1 MINUTE)")
	e.db.Exec(t, "INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES ('TZ-1', 1101, -10.00, 'DEBIT', NOW(3) - INTERVAL 2 MINUTE)")
	e.db.Exec(t, "INSERT INTO ledger_entry (biz_order_id, direction, amount, created_at) VALUES ('TZ-1', 'OUT', 10.00, NOW(3) - INTERVAL 1 MINUTE)")
	// PAY-3 has no stored position: its message is searched from its
	// created_at, found, and the group committed past it.
	var created time.Time
	if err := e.db.SQL.QueryRow("SELECT created_at FROM biz_operation WHERE biz_id = 'PAY-3'").Scan(&created); err != nil {
		t.Fatal(err)
	}
	part, off := e.produce("settlement-event", "PAY-3", "m-3", created)
	e.k.Commit(t, "settlement-consumer", "settlement-event", part, off+1)

	want := map[string]inspect.Code{
		"TZ-1":  inspect.InFlight,       // live lease, ledger ahead of the state
		"PAY-8": inspect.InFlight,       // live lease for an hour
		"PAY-7": inspect.UnknownOutcome, // lease expired 5 minutes ago
		"PAY-4": inspect.StateBehind,    // no lease
		"PAY-3": inspect.Stranded,       // found by the search, committed past
	}
	state := func() string {
		return e.str("SELECT GROUP_CONCAT(biz_id, ':', status, '/', version, '/', IFNULL(owner, '-') ORDER BY biz_id) FROM biz_operation")
	}
	before := state()
	sep := "&"
	if !strings.Contains(e.db.DSN, "?") {
		sep = "?"
	}
	if strings.Contains(e.db.DSN, "loc=") || strings.Contains(e.db.DSN, "time_zone=") {
		t.Fatalf("test DSN %q already sets loc or time_zone", e.db.DSN)
	}
	for _, c := range []struct{ name, params, zone string }{
		{"as is", "", ""},
		{"time_zone='+08:00'", "time_zone=%27%2B08:00%27", ""},
		{"time_zone='-08:00'", "time_zone=%27-08:00%27", ""},
		{"loc=Local", "loc=Local", ""},
		{"loc=Asia/Shanghai", "loc=Asia%2FShanghai", ""},
		{"loc and time_zone", "loc=Asia%2FShanghai&time_zone=%27-08:00%27", ""},
		{"mysql.time_zone SYSTEM, DSN time_zone='+08:00'", "time_zone=%27%2B08:00%27", "SYSTEM"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := e.withConfig(func(v *tenv) {
				if c.params != "" {
					v.cfg.MySQL.DSN = e.db.DSN + sep + c.params
				}
				v.cfg.MySQL.TimeZone = c.zone
			})
			v.t = t
			for id, code := range want {
				rep := v.where("settlement", id)
				wantVerdict(t, rep, code)
				if id == "PAY-3" && (rep.Kafka.Located != "searched" || rep.Kafka.Offset == nil || *rep.Kafka.Offset != off) {
					t.Errorf("PAY-3's message: %+v, want offset %d found by the search", rep.Kafka, off)
				}
			}
			for _, id := range []string{"TZ-1", "PAY-8"} {
				for _, o := range []plans.Options{{}, {Action: plans.AdvanceState, Force: true}, {Action: plans.Republish, Force: true}} {
					_, _, err := v.plan("settlement", id, o)
					var rf *plans.RefusedError
					if !errors.As(err, &rf) || rf.Code != plans.CodeInFlight {
						t.Errorf("%s %+v: %v, want refused in_flight", id, o, err)
					}
				}
			}
			if after := state(); after != before {
				t.Errorf("state rows changed:\n%s\nwant\n%s", after, before)
			}
		})
	}
}

// TestVerdictsIgnoreTheDSNTimeZoneInShanghai runs the test above with the
// operator's machine in Asia/Shanghai, where loc=Local is 8 hours from the
// server's UTC.
func TestVerdictsIgnoreTheDSNTimeZoneInShanghai(t *testing.T) {
	if os.Getenv(tzChild) != "" {
		t.Skip("this is the child run")
	}
	if _, err := time.LoadLocation("Asia/Shanghai"); err != nil {
		t.Skipf("no Asia/Shanghai on this machine: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestVerdictsIgnoreTheDSNTimeZone$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "TZ=Asia/Shanghai", tzChild+"=1")
	out, err := cmd.CombinedOutput()
	switch {
	case strings.Contains(string(out), "--- SKIP: TestVerdictsIgnoreTheDSNTimeZone "):
		t.Skipf("the child skipped:\n%s", out)
	case err != nil || !strings.Contains(string(out), "--- PASS: TestVerdictsIgnoreTheDSNTimeZone "):
		t.Fatalf("under TZ=Asia/Shanghai: %v\n%s", err, out)
	}
}
