package lab_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/cmd"
	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/lab"
	"github.com/opctl-dev/opctl/lab/consumer"
	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/reconcile/watch/worker"
	"github.com/opctl-dev/opctl/sources/config"
	kafkasrc "github.com/opctl-dev/opctl/sources/kafka"
	"github.com/opctl-dev/opctl/sources/schema"
)

// The reliability tests of the recovery worker (docs/watch.md#recovery):
// a real `opctl watch --repair STATE_BEHIND` process, killed with SIGKILL
// at random points, over seed 000's settlement schema (testdata) on
// MariaDB and a kfake cluster. Each operation is STATE_BEHIND (the ledger
// row exists, the state row still says DEBIT_DONE, the group committed
// past its message), so its repair is advance_state then a republish from
// notify: one state change and one record sent. A double repair would
// show as a second plan applied to an operation in the audit, or as more
// records in the topic than republishes.

var (
	watchBinOnce sync.Once
	watchBin     string
	watchBinErr  error
)

// opctlBin builds the opctl binary once per test run.
func opctlBin(t *testing.T) string {
	t.Helper()
	watchBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "opctl-watch-bin-")
		if err != nil {
			watchBinErr = err
			return
		}
		watchBin = filepath.Join(dir, "opctl")
		if out, err := exec.Command("go", "build", "-o", watchBin, "github.com/opctl-dev/opctl").CombinedOutput(); err != nil {
			watchBinErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if watchBinErr != nil {
		t.Fatal(watchBinErr)
	}
	return watchBin
}

// repairFixture is the settlement schema with the audit tables, a kfake
// cluster and the config.
type repairFixture struct {
	t     *testing.T
	db    *testenv.DB
	k     *testenv.Kafka
	cfg   string
	n     int
	ops   []string
	parts int32
	// produced is how many records the fixture itself wrote; pos where
	// each operation's message is, created their time.
	produced int64
	pos      [][2]int64
	created  time.Time
}

func newRepairFixture(t *testing.T) *repairFixture {
	t.Helper()
	db := testenv.MySQL(t)
	db.ExecFile(t, filepath.Join("..", "testdata", "schema", "settlement.sql"))
	for _, s := range schema.AuditDDL("") {
		db.Exec(t, s)
	}
	k := testenv.NewKafka(t, map[string]int32{"settlement-event": 8})
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "config", "settlement.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "opctl.yaml")
	if err := os.WriteFile(cfg, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return &repairFixture{t: t, db: db, k: k, cfg: cfg, parts: 8}
}

// produceAll produces the messages of the total operations the test
// will add, and commits the group past them once: the republishes that
// follow are the newest records and stay uncommitted (no consumer runs),
// so a repaired operation reads WILL_REDELIVER until the end.
func (f *repairFixture) produceAll(total int) {
	f.t.Helper()
	f.created = time.Now().UTC().Add(-2 * time.Minute).Truncate(time.Millisecond)
	ends := map[int32]int64{}
	for i := 1; i <= total; i++ {
		biz := fmt.Sprintf("SB-%03d", i)
		p, off := f.k.ProduceOp(f.t, "settlement-event", biz, "m-"+biz, f.created, f.parts, false)
		f.pos = append(f.pos, [2]int64{int64(p), off})
		f.produced++
		ends[p] = max(ends[p], off+1)
	}
	for p, end := range ends {
		f.k.Commit(f.t, "settlement-consumer", "settlement-event", p, end)
	}
}

// addBehind adds the next n STATE_BEHIND operations (their messages were
// produced by produceAll): debit and ledger done, the state at
// DEBIT_DONE, updated now (as a consumer's write would be), so that the
// poll sees them.
func (f *repairFixture) addBehind(n int) {
	f.t.Helper()
	for i := 0; i < n; i++ {
		if f.n >= len(f.pos) {
			f.t.Fatalf("addBehind: only %d messages produced", len(f.pos))
		}
		pos := f.pos[f.n]
		f.n++
		biz := fmt.Sprintf("SB-%03d", f.n)
		acct := 5000 + f.n
		f.db.Exec(f.t, "INSERT INTO account_balance VALUES (?, 990.00)", acct)
		f.db.Exec(f.t, "INSERT INTO biz_operation (biz_id, status, version, msg_id, src_partition, src_offset, created_at, updated_at) VALUES (?, 'DEBIT_DONE', 2, ?, ?, ?, ?, NOW(3))",
			biz, "m-"+biz, pos[0], pos[1], f.created)
		f.db.Exec(f.t, "INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES (?, ?, -10.00, 'DEBIT', ?)", biz, acct, f.created)
		f.db.Exec(f.t, "INSERT INTO ledger_entry (biz_order_id, direction, amount, created_at) VALUES (?, 'OUT', 10.00, ?)", biz, f.created)
		f.ops = append(f.ops, biz)
	}
}

// audit is what the audit says of each operation: the plans that applied
// an action to it, and its republishes that were published.
type audit struct {
	plans     map[string][]string
	published map[string]int
	// inflight are republishes recorded 'publishing': sent or about to be.
	inflight  map[string]int
	advanced  map[string]int
	operators map[string]bool
}

func (f *repairFixture) audit() audit {
	f.t.Helper()
	a := audit{plans: map[string][]string{}, published: map[string]int{}, inflight: map[string]int{}, advanced: map[string]int{}, operators: map[string]bool{}}
	rows, err := f.db.SQL.Query("SELECT biz_id, plan_id, action, outcome, operator FROM opctl_audit ORDER BY id")
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var biz, plan, action, outcome, op string
		if err := rows.Scan(&biz, &plan, &action, &outcome, &op); err != nil {
			f.t.Fatal(err)
		}
		if !slices.Contains(a.plans[biz], plan) {
			a.plans[biz] = append(a.plans[biz], plan)
		}
		switch {
		case action == "republish" && outcome == "published":
			a.published[biz]++
		case action == "republish":
			a.inflight[biz]++
		case action == "advance_state" && outcome == "applied":
			a.advanced[biz]++
		}
		a.operators[op] = true
	}
	return a
}

// repaired is the set of operations whose repair finished (its republish
// published).
func (a audit) repaired() map[string]bool {
	out := map[string]bool{}
	for biz, n := range a.published {
		if n > 0 {
			out[biz] = true
		}
	}
	return out
}

// records is the number of records in the topic.
func (f *repairFixture) records() int64 {
	f.t.Helper()
	kr := kafkasrc.New(config.Kafka{Brokers: f.k.Brokers, Version: "3.5.0"}, 5*time.Second)
	defer kr.Close()
	g, err := kr.Group(context.Background(), "settlement-event", "nobody")
	if err != nil {
		f.t.Fatal(err)
	}
	var n int64
	for _, p := range g.Partitions {
		n += p.LogEnd
	}
	return n
}

// checkNoDouble fails on any operation repaired twice: more than one plan
// applied to it, more than one advance or republish, or more records in
// the topic than the fixture's plus one per republish. a is the audit read
// before; while a watch repairs, the topic is read between a and a second
// read of the audit, and its republished records must number at least a's
// published ones and at most the second read's published and in flight
// (recorded 'publishing' before the send); with no watch running both are
// the same number. It returns the number of operations repaired.
func (f *repairFixture) checkNoDouble(a audit) int {
	f.t.Helper()
	sent := f.records() - f.produced
	b := f.audit()
	var low, high int64
	for _, biz := range f.ops {
		if len(b.plans[biz]) > 1 || b.advanced[biz] > 1 || b.published[biz]+b.inflight[biz] > 1 {
			f.t.Errorf("%s repaired twice: plans %v, %d advance(s), %d republish(es) (%d in flight)", biz, b.plans[biz], b.advanced[biz], b.published[biz], b.inflight[biz])
		}
		low += int64(a.published[biz])
		high += int64(b.published[biz] + b.inflight[biz])
	}
	if sent < low || sent > high {
		f.t.Errorf("the topic holds %d republished records: want %d to %d (the audit's published, then published and in flight)", sent, low, high)
	}
	a = b
	for op := range a.operators {
		if !strings.HasPrefix(op, "opctl-watch@") {
			f.t.Errorf("audit operator %q: want opctl-watch@host", op)
		}
	}
	return len(a.repaired())
}

// watchProc is one running opctl watch.
type watchProc struct {
	cmd    *exec.Cmd
	addr   string
	stderr *lockedBuf
	start  time.Time
	done   chan struct{}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (f *repairFixture) startWatch(state, events string, extra ...string) *watchProc {
	f.t.Helper()
	p := &watchProc{addr: freeAddr(f.t), stderr: &lockedBuf{}, done: make(chan struct{})}
	args := append([]string{"--config", f.cfg, "--mysql-dsn", f.db.DSN, "--brokers", strings.Join(f.k.Brokers, ","), "--timeout", "5s",
		"watch", "--listen", p.addr, "--interval", "100ms", "--older-than", "1h", "--since", "1d", "--state", state, "--events", events,
		"--repair", "STATE_BEHIND", "--max-repairs-per-minute", "600", "--repair-after", "300ms"}, extra...)
	p.cmd = exec.Command(opctlBin(f.t), args...)
	p.cmd.Stderr = p.stderr
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	f.t.Cleanup(p.kill)
	return p
}

// kill is kill -9.
func (p *watchProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (p *watchProc) get(path string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + p.addr + path)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitReady waits (up to 30 s) for /readyz.
func (p *watchProc) waitReady(t *testing.T) {
	t.Helper()
	for i := 0; i < 600; i++ {
		if code, _ := p.get("/readyz"); code == http.StatusOK {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("watch exited; stderr:\n%s", p.stderr)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("watch never ready; stderr:\n%s", p.stderr)
}

// waitStderr waits, up to a minute, until the watch's stderr says text,
// and fails the test if it never does or the watch exits first.
func (p *watchProc) waitStderr(t *testing.T, text string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(p.stderr.String(), text); {
		select {
		case <-p.done:
			t.Fatalf("the watch exited before its stderr said %q; stderr:\n%s", text, p.stderr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watch's stderr does not say %q after a minute; stderr:\n%s", text, p.stderr)
		}
	}
}

// waitRepaired waits, up to a minute, until the audit shows n operations
// repaired, and fails the test if it never does.
func (f *repairFixture) waitRepaired(t *testing.T, p *watchProc, n int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); len(f.audit().repaired()) < n; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d operations repaired after a minute; stderr:\n%s", len(f.audit().repaired()), n, p.stderr)
		}
	}
}

// repairing reports whether the watch holds the repair lock and repairs.
func (p *watchProc) repairing() bool {
	_, m := p.get("/metrics")
	return strings.Contains(m, `opctl_watch_repair_state{state="repairing"} 1`)
}

func percentile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	return s[int(q*float64(len(s)-1)+0.5)]
}

// TestWatchRepairKill9: 20 rounds of a repairing watch killed with SIGKILL
// at a random point (0.1–1.5 s after its start: during its start, its
// resume, a plan, an apply between its two actions or after its send, a
// verification), restarted from its state file each time. After every
// restart each operation not yet repaired is flagged (/targets), and at
// the end every operation is repaired exactly once.
func TestWatchRepairKill9(t *testing.T) {
	f := newRepairFixture(t)
	f.produceAll(130)
	f.addBehind(10)
	dir := t.TempDir()
	state, events := filepath.Join(dir, "watch.json"), filepath.Join(dir, "events.jsonl")
	rng := rand.New(rand.NewPCG(26, 4))
	lost, rounds, cuts := 0, 20, map[string]bool{}
	for round := 1; round <= rounds; round++ {
		f.addBehind(6) // new incidents while the watch is down
		// The operations flagged before the kill and not repaired.
		b, _ := os.ReadFile(events)
		flagged := map[string]bool{}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, `"event":"flagged"`) || strings.Contains(l, `"event":"changed"`) {
				if i := strings.Index(l, `"biz_id":"`); i >= 0 {
					flagged[strings.SplitN(l[i+10:], `"`, 2)[0]] = true
				}
			}
		}
		p := f.startWatch(state, events)
		p.waitReady(t)
		// Nothing flagged is lost: each operation flagged before the kill
		// is, after the restart, repaired or in /targets (the repaired set
		// is read after /targets: a repair in between counts as repaired).
		// A flag the kill kept out of the state file (it is saved at most
		// once a second) is found again by the first polls: up to 10 s.
		missing := []string{}
		for i := 0; i < 100; i++ {
			_, body := p.get("/targets")
			done := f.audit().repaired()
			missing = missing[:0]
			for biz := range flagged {
				if !done[biz] && !strings.Contains(body, `"biz_id":"`+biz+`"`) {
					missing = append(missing, biz)
				}
			}
			if len(missing) == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if len(missing) > 0 {
			lost += len(missing)
			t.Errorf("round %d: %v flagged before the kill, neither repaired nor flagged after the restart; stderr:\n%s", round, missing, p.stderr)
		}
		delay := time.Duration(rng.IntN(1200)) * time.Millisecond
		time.Sleep(delay)
		p.kill()
		a := f.audit()
		n := f.checkNoDouble(a)
		cut := 0
		for biz := range a.advanced {
			if a.published[biz] == 0 {
				cut++
				cuts[biz] = true
			}
		}
		t.Logf("round %2d: killed %3d ms after ready (%4d ms after start); %3d/%3d repaired, %d cut between advance and publish",
			round, delay.Milliseconds(), time.Since(p.start).Milliseconds(), n, len(f.ops), cut)
	}
	// A last run without a kill repairs what is left.
	p := f.startWatch(state, events)
	p.waitReady(t)
	for i := 0; i < 600 && len(f.audit().repaired()) < len(f.ops); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	p.kill()
	a := f.audit()
	if n := f.checkNoDouble(a); n != len(f.ops) {
		t.Errorf("%d of %d operations repaired at the end; stderr:\n%s", n, len(f.ops), p.stderr)
	}
	b, _ := os.ReadFile(events)
	if c := bytes.Count(b, []byte(`"event":"repair_failed"`)); c != 0 {
		t.Errorf("%d repair_failed lines:\n%s", c, b)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d rounds of kill -9: %d operations, each repaired once (0 double repairs); %d lost flags; %d repaired lines; %d repairs cut between their two actions (left in flight) and finished after a restart",
		rounds, len(f.ops), lost, bytes.Count(b, []byte(`"event":"repaired"`)), len(cuts))
}

// TestWatchRepairTakeover: two watches of the same pipelines; the one that
// holds the repair lock is killed with SIGKILL at a random point while it
// repairs (20 rounds), the other takes the lock over, and the killed one
// is started again (it waits as standby). No operation is repaired twice;
// the takeover time (from the kill to the survivor's
// opctl_watch_repair_state{state="repairing"} 1) is reported.
func TestWatchRepairTakeover(t *testing.T) {
	f := newRepairFixture(t)
	f.produceAll(80)
	f.addBehind(20)
	dir := t.TempDir()
	var procs [2]*watchProc
	start := func(i int) {
		procs[i] = f.startWatch(filepath.Join(dir, fmt.Sprintf("watch-%d.json", i)), filepath.Join(dir, fmt.Sprintf("events-%d.jsonl", i)))
	}
	start(0)
	procs[0].waitReady(t)
	start(1)
	procs[1].waitReady(t)
	rng := rand.New(rand.NewPCG(26, 5))
	var takeovers []time.Duration
	both := 0
	for round := 1; round <= 20; round++ {
		f.addBehind(3)
		leader := -1
		for i := 0; i < 400 && leader < 0; i++ {
			r0, r1 := procs[0].repairing(), procs[1].repairing()
			if r0 && r1 {
				both++
				t.Errorf("round %d: both watches repair", round)
			}
			switch {
			case r0:
				leader = 0
			case r1:
				leader = 1
			default:
				time.Sleep(25 * time.Millisecond)
			}
		}
		if leader < 0 {
			t.Fatalf("round %d: no watch repairs; stderr:\n%s\n%s", round, procs[0].stderr, procs[1].stderr)
		}
		other := 1 - leader
		time.Sleep(time.Duration(rng.IntN(600)) * time.Millisecond)
		procs[leader].kill()
		killed := time.Now()
		took := time.Duration(0)
		for i := 0; i < 1000; i++ {
			if procs[other].repairing() {
				took = time.Since(killed)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if took == 0 {
			t.Fatalf("round %d: the standby never took over; stderr:\n%s", round, procs[other].stderr)
		}
		takeovers = append(takeovers, took)
		n := f.checkNoDouble(f.audit())
		t.Logf("round %2d: killed watch %d, watch %d took over in %4d ms; %d/%d repaired", round, leader, other, took.Milliseconds(), n, len(f.ops))
		start(leader)
		procs[leader].waitReady(t)
	}
	for i := 0; i < 600 && len(f.audit().repaired()) < len(f.ops); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	n := f.checkNoDouble(f.audit())
	if n != len(f.ops) {
		t.Errorf("%d of %d operations repaired at the end", n, len(f.ops))
	}
	if t.Failed() {
		return
	}
	t.Logf("20 takeovers: p50 %d ms, max %d ms; %d operations, each repaired once; 0 double repairs; both repairing seen %d times",
		percentile(takeovers, 0.5).Milliseconds(), percentile(takeovers, 1).Milliseconds(), len(f.ops), both)
}

// TestWatchRepairPause: a watch started with its pause file present
// flags the operations and repairs none (one paused line,
// opctl_watch_repair_state{state="paused"} 1); once the file is removed it
// repairs each, writes a repaired line per operation and counts them in
// opctl_watch_repairs_total.
func TestWatchRepairPause(t *testing.T) {
	f := newRepairFixture(t)
	f.produceAll(4)
	f.addBehind(4)
	dir := t.TempDir()
	pause, events := filepath.Join(dir, "pause"), filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(pause, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	p := f.startWatch("none", events, "--repair-pause-file", pause)
	p.waitReady(t)
	read := func() string { b, _ := os.ReadFile(events); return string(b) }
	for i := 0; i < 200 && strings.Count(read(), `"event":"flagged"`) < 4; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if n := strings.Count(read(), `"event":"flagged"`); n != 4 {
		t.Fatalf("%d flagged lines, want 4:\n%s", n, read())
	}
	_, m := p.get("/metrics")
	if a := f.audit(); len(a.plans) != 0 || !strings.Contains(m, `opctl_watch_repair_state{state="paused"} 1`) ||
		strings.Count(read(), `"event":"paused"`) != 1 {
		t.Fatalf("paused: audit %v, events:\n%s\nmetrics:\n%s", a.plans, read(), m)
	}
	if err := os.Remove(pause); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 400 && strings.Count(read(), `"event":"repaired"`) < 4; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	_, m = p.get("/metrics")
	if n := f.checkNoDouble(f.audit()); n != 4 || strings.Count(read(), `"event":"repaired"`) != 4 ||
		!strings.Contains(m, `opctl_watch_repairs_total{outcome="repaired",verdict="STATE_BEHIND"} 4`) ||
		!strings.Contains(m, `opctl_watch_repair_state{state="repairing"} 1`) || !strings.Contains(p.stderr.String(), "repairs resume") {
		t.Fatalf("after the pause: %d repaired; events:\n%s\nmetrics:\n%s\nstderr:\n%s", n, read(), m, p.stderr)
	}
}

// TestWatchRepairsAnInjectedIncident: the lab's stranded-early-commit
// incident (a consumer commits on receipt and dies after the debit) under
// `opctl watch --repair STRANDED`: the worker repairs PAY-E-1 by itself
// (rewind and republish, operator opctl-watch@host), the lab's fixed
// consumer reads the republished record and finishes it, and every effect
// is there exactly once: the debit (the balance), the ledger row, the
// notify call at the downstream.
func TestWatchRepairsAnInjectedIncident(t *testing.T) {
	testenv.MySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, err := lab.Start(ctx, lab.Options{MySQLDSN: testenv.RootDSN(), Timings: consumer.FastTimings()})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	for _, s := range schema.AuditDDL(env.Config.Audit.AuditTable()) {
		if _, err := env.DB.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	stderr := &lockedBuf{}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan int, 1)
	go func() {
		done <- cmd.Run(wctx, &iostreams.IOStreams{In: strings.NewReader(""), Out: &lockedBuf{}, ErrOut: stderr},
			[]string{"--config", env.ConfigPath, "watch", "--listen", freeAddr(t), "--events", events,
				"--interval", "200ms", "--older-than", "1s", "--since", "1d", "--state", "none", "--repair", "STRANDED", "--repair-after", "1s"})
	}()
	var sc *lab.Scenario
	for _, s := range lab.Scenarios() {
		if s.Name == "stranded-early-commit" {
			sc = &s
		}
	}
	results, err := env.Run(ctx, []lab.Scenario{*sc}, nil)
	if err != nil || results[0].Err != nil {
		t.Fatalf("scenario: %v %v", err, results[0].Err)
	}
	read := func() string { b, _ := os.ReadFile(events); return string(b) }
	for i := 0; i < 600 && !strings.Contains(read(), `"event":"repaired","at"`); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(read(), `"biz_id":"PAY-E-1","verdict":"WILL_REDELIVER"`) {
		t.Fatalf("PAY-E-1 not repaired by the watch; events:\n%s\nstderr:\n%s", read(), stderr)
	}
	if err := env.DeployFixed(ctx, nil); err != nil {
		t.Fatal(err)
	}
	svc, closeSvc, err := env.Service(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSvc()
	var verdict string
	for i := 0; i < 400 && verdict != "COMPLETE"; i++ {
		r, err := env.Triage(ctx, svc, "settlement", "PAY-E-1")
		if err != nil {
			t.Fatal(err)
		}
		verdict = string(r.Verdict.Code)
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	<-done
	if verdict != "COMPLETE" {
		t.Fatalf("PAY-E-1 after the repair and the fixed consumer: %s; events:\n%s", verdict, read())
	}
	inv, err := env.Invariants(ctx, results)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range inv {
		if !i.Holds {
			t.Errorf("invariant %s: %s", i.Name, i.Detail)
		}
	}
	var ledger, plans int
	var op string
	if err := env.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM ledger_entry WHERE biz_order_id = 'PAY-E-1'").Scan(&ledger); err != nil {
		t.Fatal(err)
	}
	if err := env.DB.QueryRowContext(ctx, "SELECT COUNT(DISTINCT plan_id), MIN(operator) FROM "+env.Config.Audit.AuditTable()+" WHERE biz_id = 'PAY-E-1'").Scan(&plans, &op); err != nil {
		t.Fatal(err)
	}
	notify := env.Naive.Notify.Net("PAY-E-1")
	if ledger != 1 || plans != 1 || !strings.HasPrefix(op, "opctl-watch@") || notify != 1 {
		t.Errorf("PAY-E-1: %d ledger row(s), %d plan(s) by %q, %d notify effect(s): want 1, 1 by opctl-watch@host, 1", ledger, plans, op, notify)
	}
	t.Logf("events:\n%s", read())
}

// TestWatchRepairLockLost: the server ends the connection that holds the
// repair lock (KILL, as a failover or a network cut would): the watch
// notices within its keep-alive, says the lock was lost, stops repairing,
// takes the lock again and repairs the operations added after.
func TestWatchRepairLockLost(t *testing.T) {
	f := newRepairFixture(t)
	f.produceAll(6)
	f.addBehind(3)
	dir := t.TempDir()
	p := f.startWatch("none", filepath.Join(dir, "events.jsonl"))
	p.waitReady(t)
	// Each step waits for what it needs, up to a minute (a loaded machine
	// is slow, never wrong).
	p.waitStderr(t, "holding the repair lock")
	f.waitRepaired(t, p, 3)
	// The lock is named for this test's database: no other test's watch
	// of "settlement" on this server holds it.
	name := worker.LockName(f.db.Name, []string{"settlement"})
	var conn sql.NullInt64
	if err := f.db.SQL.QueryRow("SELECT IS_USED_LOCK(?)", name).Scan(&conn); err != nil || !conn.Valid {
		t.Fatalf("nobody holds %s (%v) while the watch says it does; stderr:\n%s", name, err, p.stderr)
	}
	if _, err := f.db.SQL.Exec(fmt.Sprintf("KILL CONNECTION %d", conn.Int64)); err != nil {
		t.Fatal(err)
	}
	p.waitStderr(t, "was lost (its connection failed)")
	p.waitStderr(t, "took the repair lock")
	f.addBehind(3)
	f.waitRepaired(t, p, 6)
	p.kill()
	if n := f.checkNoDouble(f.audit()); n != 6 {
		t.Errorf("%d of 6 repaired; stderr:\n%s", n, p.stderr)
	}
}

// TestWatchRepairsSeed003OnItsOwnSchema: the recovery worker on seed 003's
// own tables (SPEC §14: records without a biz_id, the order's status in
// its own table, the points grant only at the downstream): `opctl watch
// --repair WRONGLY_SKIPPED` flags 8821 (PAID recorded SKIPPED after
// SHIPPED), repairs it by itself through the same plan as `opctl repair
// apply` (one redrive of points, operator opctl-watch@host), and the
// points are granted exactly once. In binlog mode; a polling watch flags
// 8821 from the poll of its SKIPPED record (TestWatchPollingSeed003Records).
func TestWatchRepairsSeed003OnItsOwnSchema(t *testing.T) {
	srv := binlogSrv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := startSeedLab(ctx, t, srv.RootDSN)
	for _, s := range schema.AuditDDL(env.Config.Audit.AuditTable()) {
		if _, err := env.DB.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	stderr := &lockedBuf{}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan int, 1)
	go func() {
		done <- cmd.Run(wctx, &iostreams.IOStreams{In: strings.NewReader(""), Out: &lockedBuf{}, ErrOut: stderr},
			[]string{"--config", env.ConfigPath, "watch", "--pipeline", "orders_seed", "--source", "binlog", "--listen", freeAddr(t), "--events", events,
				"--interval", "200ms", "--older-than", "1s", "--since", "1d", "--state", "none", "--repair", "WRONGLY_SKIPPED", "--repair-after", "500ms"})
	}()
	scenario, err := lab.Select([]string{"order-wrongly-skipped-seed"})
	if err != nil {
		t.Fatal(err)
	}
	results, err := env.Run(ctx, scenario, nil)
	if err != nil || results[0].Err != nil {
		t.Fatalf("scenario: %v %v", err, results[0].Err)
	}
	read := func() string { b, _ := os.ReadFile(events); return string(b) }
	repaired := `"event":"repaired","at"`
	for i := 0; i < 1200 && !strings.Contains(read(), repaired); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	<-done
	if !strings.Contains(read(), `"event":"flagged"`) || !strings.Contains(read(), repaired) || !strings.Contains(read(), `"biz_id":"8821"`) {
		t.Fatalf("8821 not flagged and repaired by the watch; events:\n%s\nstderr:\n%s", read(), stderr)
	}
	if n := env.Seeds.Points.Net("8821"); n != 1 {
		t.Errorf("points grants of 8821: %d, want exactly 1", n)
	}
	var plans int
	var op string
	if err := env.DB.QueryRowContext(ctx, "SELECT COUNT(DISTINCT plan_id), MIN(operator) FROM "+env.Config.Audit.AuditTable()+" WHERE biz_id = '8821'").Scan(&plans, &op); err != nil {
		t.Fatal(err)
	}
	if plans != 1 || !strings.HasPrefix(op, "opctl-watch@") {
		t.Errorf("8821: %d plan(s) by %q, want 1 by opctl-watch@host", plans, op)
	}
	t.Logf("events:\n%s", read())
}
