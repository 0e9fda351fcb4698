// Command watch measures `opctl watch` under a steady load of the lab's
// consumers (docs/performance.md, "watch: event-driven detection against a
// periodic reconcile"), one run per mode, on this machine:
//
//	go run ./lab/bench/watch -opctl /tmp/opctl -mode poll
//	go run ./lab/bench/watch -opctl /tmp/opctl -mode binlog -rates 300,400 -duration 150s
//
// lab/bench/watch.sh builds opctl and runs it. It starts a private MariaDB
// (lab/testenv.StartBinlogServer: a ROW binlog, nothing else on it, so its
// counters are ours), the lab (lab.Start: its schema, an in-process Kafka
// cluster, the downstream services) and three consumer groups:
//
//   - settlement_anchored: the steady load, PAY-L-n messages (debit,
//     ledger, notify with an intent; a state row with a lease);
//   - settlement (seed 000's naive consumer), -naive-share of the
//     operations, PAY-N-n: each effect and its state update are two
//     statements, so a triage that falls between them flags a
//     STATE_BEHIND that the next one clears (the race of event-driven
//     detection on such a consumer; counted, not an incident);
//   - orders (seed 003's naive consumer): ORD-L-n PAID events on PAID
//     orders, and, for -incident-rate of the operations, seed 003's
//     incident: SHIPPED reaches the log before PAID, PAID is recorded
//     SKIPPED and the points are never granted (WRONGLY_SKIPPED, a target
//     from the commit of its SKIPPED row: the detection latency);
//   - fulfilment_anchored: every -stuck-every a consumer that dies after
//     its WMS lock (state WMS_CONFIRMED, a 1 s lease), replaced by the next
//     one -stuck-every later (which resumes it): stuck once its row is
//     older than -older-than (the timer's delay).
//
// Then it runs the opctl binary's `watch` as a process of its own (CPU from
// /proc/PID/stat, peak RSS from VmHWM), with its own MySQL user (rows read
// per user from MariaDB's userstat), first over a ladder of -rates (-step
// each) to find the highest rate the consumers keep up with, then over
// -duration at that rate; then `opctl reconcile` as a 5-minute cron would
// run it, over the same data, with a user of its own.
//
// It prints a JSON summary on stdout and a human one on stderr.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/lab"
	"github.com/opctl-dev/opctl/lab/consumer"
	"github.com/opctl-dev/opctl/lab/testenv"
)

type options struct {
	Opctl         string
	Mode          string
	WatchArgs     []string
	Rates         []int
	Step          time.Duration
	Duration      time.Duration
	Interval      time.Duration
	OlderThan     time.Duration
	IncidentRate  float64
	StuckEvery    time.Duration
	CronEvery     time.Duration
	Out           string
	EvidenceIndex bool
	NaiveShare    float64
}

func main() {
	var o options
	var rates, wargs string
	flag.StringVar(&o.Opctl, "opctl", "", "the opctl binary to measure (required: go build -o /tmp/opctl .)")
	flag.StringVar(&o.Mode, "mode", "poll", "poll or binlog: the source the watch follows (binlog: -watch-args must select it if the watch does not by itself)")
	flag.StringVar(&wargs, "watch-args", "", "more arguments of `opctl watch`, space separated")
	flag.StringVar(&rates, "rates", "50,100,150,200,300,400,500", "the ladder of total rates (operations/s) to try, -step each; the highest at which the consumers keep up and the watch meets its latency target is measured for -duration")
	flag.DurationVar(&o.Step, "step", 20*time.Second, "the length of each ladder step")
	flag.DurationVar(&o.Duration, "duration", 150*time.Second, "the measured run")
	flag.DurationVar(&o.Interval, "interval", time.Second, "watch --interval")
	flag.DurationVar(&o.OlderThan, "older-than", 5*time.Second, "watch --older-than (and reconcile's)")
	flag.Float64Var(&o.IncidentRate, "incident-rate", 0.003, "share of the operations that are seed 003's wrongly skipped incident")
	flag.DurationVar(&o.StuckEvery, "stuck-every", 15*time.Second, "a consumer dies mid-operation this often")
	flag.DurationVar(&o.CronEvery, "cron-every", 5*time.Minute, "the period of the reconcile cron it is compared with")
	flag.BoolVar(&o.EvidenceIndex, "evidence-index", true, "index balance_journal and debit_log (reverses_id, kind) for the debit evidence's NOT EXISTS")
	flag.Float64Var(&o.NaiveShare, "naive-share", 0.1, "share of the operations on seed 000's naive settlement consumer (effect and state in two statements: a triage between them flags a transient STATE_BEHIND)")
	flag.StringVar(&o.Out, "out", "", "keep the events, stderr and metrics of the watch in this directory (default: a temporary one, removed)")
	flag.Parse()
	for _, s := range strings.Split(rates, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "watch bench: -rates %q: want positive integers separated by commas\n", rates)
			os.Exit(2)
		}
		o.Rates = append(o.Rates, n)
	}
	if wargs != "" {
		o.WatchArgs = strings.Fields(wargs)
	}
	if o.Opctl == "" || (o.Mode != "poll" && o.Mode != "binlog") {
		fmt.Fprintln(os.Stderr, "watch bench: -opctl BINARY is required and -mode is poll or binlog")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "watch bench:", err)
		os.Exit(1)
	}
	b, _ := json.MarshalIndent(sum, "", "  ")
	fmt.Println(string(b))
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, a...))
}

// loadavg is /proc/loadavg's first three fields: the machine is shared.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// bench is one run's lab, consumers, producer and watch process.
type bench struct {
	o        options
	srv      *testenv.BinlogServer
	root     *sql.DB
	env      *lab.Env
	dir      string
	producer sarama.SyncProducer
	rec      *recorder

	watchCfg, cronCfg string
	watch             *exec.Cmd
	watchDone         chan struct{}
	addr              string
	events            string

	seq       atomic.Int64
	produced  atomic.Int64 // operations produced (each counted once)
	naive     atomic.Int64 // naive settlement operations produced
	naive0    int64        // naive before the measured run
	anchored  atomic.Int64 // settlement_anchored operations produced
	anchored0 int64
	stuckMu   sync.Mutex
	stuck     []stuckOp
	// clearedAt is each operation's last cleared line (a stuck one's:
	// resumed by the next consumer); zero when it was still flagged.
	clearedAt map[string]time.Time
}

// stuckOp is one operation left by a consumer that died mid-way.
type stuckOp struct {
	BizID     string
	UpdatedAt time.Time // its state row's updated_at (database clock)
	LeaseTo   time.Time
	DBSkew    time.Duration // database clock minus this process's
}

func run(ctx context.Context, o options) (_ *summary, err error) {
	b := &bench{o: o, rec: newRecorder()}
	defer b.close()
	if o.Out != "" {
		b.dir = o.Out
		if err := os.MkdirAll(b.dir, 0o755); err != nil {
			return nil, err
		}
	} else {
		if b.dir, err = os.MkdirTemp("", "opctl-watch-bench-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(b.dir)
	}
	logf("starting a private MariaDB (ROW binlog) and the lab; load %s", loadavg())
	if b.srv, err = testenv.StartBinlogServer(testenv.BinlogOptions{}); err != nil {
		return nil, err
	}
	if b.root, err = sql.Open("mysql", b.srv.RootDSN); err != nil {
		return nil, err
	}
	// userstat counts the rows each user's connections read: the watch,
	// the cron and the lab each have a user.
	for _, q := range []string{
		"SET GLOBAL userstat = 1",
		"CREATE USER opctl_watch@'%'", "GRANT ALL ON *.* TO opctl_watch@'%'",
		"CREATE USER opctl_cron@'%'", "GRANT ALL ON *.* TO opctl_cron@'%'",
	} {
		if _, err := b.root.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("%s: %v", q, err)
		}
	}
	if b.env, err = lab.Start(ctx, lab.Options{MySQLDSN: b.srv.RootDSN, Timings: consumer.FastTimings()}); err != nil {
		return nil, err
	}
	b.env.DB.SetMaxOpenConns(128)
	b.env.DB.SetMaxIdleConns(128)
	if err := b.prepare(ctx); err != nil {
		return nil, err
	}
	if b.producer, err = sarama.NewSyncProducer(b.env.Cluster.Brokers, consumer.ProducerConfig("opctl-watch-bench")); err != nil {
		return nil, err
	}
	if err := b.startConsumers(ctx); err != nil {
		return nil, err
	}
	if err := b.startWatch(ctx, "ladder"); err != nil {
		return nil, err
	}
	sum := &summary{Mode: o.Mode, Interval: o.Interval.String(), OlderThan: o.OlderThan.String(), WatchArgs: o.WatchArgs}

	// The ladder: the highest rate whose backlog stays under a second of
	// load at the end of its step and whose incidents the watch flagged
	// within its latency target.
	// The ladder goes on while the consumers keep up (their highest rate
	// is reported); the measured rate is the highest up to which the
	// watch met its target at every step.
	rate, watchOK := 0, true
	for _, r := range o.Rates {
		st, err := b.load(ctx, r, o.Step, false)
		if err != nil {
			return nil, err
		}
		sum.Ladder = append(sum.Ladder, st)
		logf("ladder %d ops/s: produced %.0f ops/s, backlog %d at the end, drained in %.1fs; watch: %d incidents, %d not flagged 15s after, p99 %.0f max %.0f ms; load %s",
			r, st.ProducedPerS, st.Backlog, st.DrainS, st.Incidents, st.Unflagged, st.WatchP99, st.WatchMax, st.Load)
		if !st.Kept {
			break
		}
		sum.ConsumersMax = r
		watchOK = watchOK && st.WatchKept
		if watchOK {
			rate = r
			// Let the watch catch up before the next stretch.
			if err := b.quiesce(ctx); err != nil {
				return nil, err
			}
		}
	}
	if rate == 0 {
		rate = o.Rates[0]
		sum.Note = fmt.Sprintf("the consumers and the watch did not both keep up with %d ops/s (the lowest rate tried): measured at it anyway", rate)
	}
	sum.Rate = rate

	// The measured run, with a watch of its own (its CPU, VmHWM and
	// events are the run's; its first sweep reads what the ladder left).
	if err := b.settle(ctx); err != nil {
		return nil, err
	}
	b.stopWatch()
	if err := b.startWatch(ctx, "run"); err != nil {
		return nil, err
	}
	if err := b.quiesce(ctx); err != nil {
		return nil, err
	}
	m0, err := b.sample(ctx)
	if err != nil {
		return nil, err
	}
	b.naive0, b.anchored0 = b.naive.Load(), b.anchored.Load()
	st, err := b.load(ctx, rate, o.Duration, true)
	if err != nil {
		return nil, err
	}
	sum.Run = st
	// Let the last stuck operation cross --older-than and its flag come.
	if err := sleep(ctx, o.OlderThan+3*time.Second); err != nil {
		return nil, err
	}
	m1, err := b.sample(ctx)
	if err != nil {
		return nil, err
	}
	sum.LoadEnd = loadavg()
	b.stopWatch()
	if err := b.analyse(ctx, sum, m0, m1, st); err != nil {
		return nil, err
	}
	if err := b.cron(ctx, sum, st); err != nil {
		return nil, err
	}
	report(os.Stderr, sum)
	return sum, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func (b *bench) close() {
	b.stopWatch()
	b.rec.stopAll()
	if b.producer != nil {
		b.producer.Close()
	}
	if b.env != nil {
		b.env.Close()
	}
	if b.root != nil {
		b.root.Close()
	}
	b.srv.Stop()
}

// prepare gives the polled tables the index docs/watch.md#polling asks
// for, opens accounts, and writes the watch's and the cron's configs (the
// lab's, with a user of their own).
func (b *bench) prepare(ctx context.Context) error {
	// The settlement pipelines' debit evidence (lab/opctl.yaml.tmpl)
	// looks for a reversal with NOT EXISTS (... r.kind = 'REVERSAL' AND
	// r.reverses_id = j.id): without an index on reverses_id every triage
	// reads the whole journal (rows read per operation grow with the
	// table; `opctl schema check` checks the walks' indexes, not the
	// evidence queries'). -evidence-index=false measures without it.
	var reverses [2]string
	if b.o.EvidenceIndex {
		reverses = [2]string{"CREATE INDEX ix_reverses ON balance_journal (reverses_id, kind)",
			"CREATE INDEX ix_reverses ON debit_log (reverses_id, kind)"}
	}
	for _, q := range []string{
		reverses[0], reverses[1],
		"CREATE INDEX ix_watch ON pay_state (updated_at, biz_id)",
		"CREATE INDEX ix_watch ON ful_state (updated_at, biz_id)",
		"CREATE INDEX ix_watch ON biz_operation (updated_at, biz_id)",
		"CREATE INDEX ix_watch ON fulfil_state (updated_at, biz_id)",
		"CREATE INDEX ix_watch ON idempotent (created_at, msg_id)",
		"CREATE INDEX ix_watch ON order_idem (created_at, msg_id)",
		"CREATE INDEX ix_watch ON orders (updated_at, order_id)",
	} {
		if q == "" {
			continue
		}
		if _, err := b.env.DB.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %v", q, err)
		}
	}
	var vals []string
	for i := 1; i <= 1000; i++ {
		vals = append(vals, fmt.Sprintf("(%d, 1000000000.00)", 100000+i))
	}
	if _, err := b.env.DB.ExecContext(ctx, "INSERT INTO account_balance (account_id, balance) VALUES "+strings.Join(vals, ",")); err != nil {
		return fmt.Errorf("accounts: %v", err)
	}
	// The indexes `opctl schema check` finds missing, added as a team
	// would (opctl schema apply --indexes).
	for _, args := range [][]string{{"schema", "check"}, {"schema", "apply", "--indexes", "--yes"}} {
		out, err := exec.CommandContext(ctx, b.o.Opctl, append([]string{"--config", b.env.ConfigPath}, args...)...).CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		logf("opctl %s: %v\n%s", strings.Join(args, " "), err, strings.Join(lines[max(0, len(lines)-6):], "\n"))
	}
	cfg := b.env.RenderConfig()
	if !strings.Contains(cfg, "root@tcp(") {
		return fmt.Errorf("the lab config's DSN is not root@tcp(...): cannot give the watch a user of its own")
	}
	b.watchCfg, b.cronCfg = filepath.Join(b.dir, "watch.yaml"), filepath.Join(b.dir, "cron.yaml")
	if err := os.WriteFile(b.watchCfg, []byte(strings.ReplaceAll(cfg, "root@tcp(", "opctl_watch@tcp(")), 0o600); err != nil {
		return err
	}
	return os.WriteFile(b.cronCfg, []byte(strings.ReplaceAll(cfg, "root@tcp(", "opctl_cron@tcp(")), 0o600)
}

// consumerConfig is a lab pipeline's consumer (as lab's own, which is not
// exported): its topic and group, the lab's brokers and database, the
// downstream set of its design.
func (b *bench) consumerConfig(pipeline, clientID string, kind consumer.Kind, design consumer.Design) consumer.Config {
	p := b.env.Config.Pipeline(pipeline)
	services := lab.URLs(b.env.Naive)
	if design == consumer.Anchored {
		services = lab.URLs(b.env.Anchored)
	}
	return consumer.Config{Kind: kind, Design: design, Topic: p.Topic, Group: p.Group, ClientID: clientID,
		Brokers: b.env.Cluster.Brokers, DB: b.env.DB, Services: services, RPCTimeout: time.Second,
		LeaseTTL: 2 * time.Minute, Timings: consumer.FastTimings()}
}

func (b *bench) start(ctx context.Context, cfg consumer.Config) (*consumer.Consumer, error) {
	cfg.Events = b.rec.channel()
	c, err := consumer.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("start %s consumer %s: %v", cfg.Group, cfg.ClientID, err)
	}
	b.rec.own(c)
	return c, nil
}

func (b *bench) startConsumers(ctx context.Context) error {
	if _, err := b.start(ctx, b.consumerConfig("settlement_anchored", "load-pay-1", consumer.Settlement, consumer.Anchored)); err != nil {
		return err
	}
	if _, err := b.start(ctx, b.consumerConfig("orders", "load-ord-1", consumer.Orders, consumer.Naive)); err != nil {
		return err
	}
	if b.o.NaiveShare > 0 {
		if _, err := b.start(ctx, b.consumerConfig("settlement", "load-naive-1", consumer.Settlement, consumer.Naive)); err != nil {
			return err
		}
	}
	return nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (b *bench) startWatch(ctx context.Context, name string) error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	b.addr, b.events = addr, filepath.Join(b.dir, "events-"+name+".jsonl")
	args := append([]string{"--config", b.watchCfg, "watch", "--listen", addr, "--events", b.events,
		"--interval", b.o.Interval.String(), "--older-than", fmtDur(b.o.OlderThan), "--since", "1h", "--state", "none"}, b.o.WatchArgs...)
	logf("opctl %s", strings.Join(args, " "))
	stderr, err := os.Create(filepath.Join(b.dir, "watch-"+name+".stderr"))
	if err != nil {
		return err
	}
	b.watch = exec.Command(b.o.Opctl, args...)
	b.watch.Stdout, b.watch.Stderr = stderr, stderr
	if err := b.watch.Start(); err != nil {
		return fmt.Errorf("start %s: %v", b.o.Opctl, err)
	}
	b.watchDone = make(chan struct{})
	go func() { _ = b.watch.Wait(); stderr.Close(); close(b.watchDone) }()
	for i := 0; i < 600; i++ {
		if code, _ := b.get("/readyz"); code == http.StatusOK {
			logf("watch ready (pid %d)", b.watch.Process.Pid)
			return nil
		}
		select {
		case <-b.watchDone:
			se, _ := os.ReadFile(filepath.Join(b.dir, "watch-"+name+".stderr"))
			return fmt.Errorf("opctl watch exited before it was ready:\n%s", se)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("opctl watch not ready after 60s")
}

// fmtDur is d in a unit opctl's duration flags accept (s, m, h, d).
func fmtDur(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", int64(d/time.Second))
	}
	return d.String()
}

func (b *bench) stopWatch() {
	if b.watch == nil || b.watch.Process == nil || b.watchDone == nil {
		return
	}
	select {
	case <-b.watchDone:
		return
	default:
	}
	_ = b.watch.Process.Signal(os.Interrupt)
	select {
	case <-b.watchDone:
	case <-time.After(10 * time.Second):
		_ = b.watch.Process.Kill()
		<-b.watchDone
	}
}

func (b *bench) get(path string) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + b.addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// stepStats is one stretch of load.
type stepStats struct {
	Rate         int     `json:"rate"`
	Seconds      float64 `json:"seconds"`
	Produced     int64   `json:"produced"`
	ProducedPerS float64 `json:"produced_per_s"`
	Backlog      int64   `json:"backlog_at_end"`
	DrainS       float64 `json:"drain_s"`
	Kept         bool    `json:"kept_up"`
	Incidents    int     `json:"incidents"`
	Stuck        int     `json:"stuck"`
	Load         string  `json:"load_during"`
	// WatchKept: every incident of the stretch was flagged within 15 s
	// of its end, with a p99 within the target (--interval + 1 s
	// polling, 1 s binlog); WatchP99 and WatchMax are their latencies
	// from the consumer's commit of the SKIPPED row (ms), Unflagged
	// those not flagged in time.
	WatchKept bool    `json:"watch_kept_up"`
	WatchP99  float64 `json:"watch_p99_ms"`
	WatchMax  float64 `json:"watch_max_ms"`
	Unflagged int     `json:"unflagged"`
	incidents []string
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
}

// load produces rate operations a second for d: two thirds settlement
// (PAY-L-n), a third orders (ORD-L-n), incidents among the orders and,
// when measured, a stuck operation every StuckEvery. It returns once the
// consumers have drained the backlog (or 60 s after the end).
func (b *bench) load(ctx context.Context, rate int, d time.Duration, measured bool) (stepStats, error) {
	st := stepStats{Rate: rate, Start: time.Now()}
	rnd := rand.New(rand.NewPCG(uint64(rate), uint64(time.Now().UnixNano())))
	type job struct {
		fn func() error
	}
	jobs := make(chan job, 4096)
	var wg sync.WaitGroup
	var perr atomic.Value
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := j.fn(); err != nil {
					perr.Store(err)
				}
			}
		}()
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stuckDone := make(chan struct{})
	if measured {
		go func() {
			defer close(stuckDone)
			b.stuckLoop(lctx)
		}()
	} else {
		close(stuckDone)
	}
	tick := time.Second / time.Duration(rate)
	start := time.Now()
	var n int64
	produced0 := b.produced.Load()
	for time.Since(start) < d {
		want := int64(time.Since(start) / tick)
		for ; n < want; n++ {
			i := b.seq.Add(1)
			var fn func() error
			if i%3 != 0 && b.o.NaiveShare > 0 && rnd.Float64() < b.o.NaiveShare*1.5 {
				fn = b.naiveSettlement(i)
			} else if i%3 != 0 {
				fn = b.settlement(i)
			} else if rnd.Float64() < b.o.IncidentRate*3 {
				st.Incidents++
				st.incidents = append(st.incidents, fmt.Sprintf("ORD-X-%d", i))
				fn = b.orderIncident(ctx, i)
			} else {
				fn = b.order(ctx, i)
			}
			select {
			case jobs <- job{fn}:
			case <-ctx.Done():
				close(jobs)
				return st, ctx.Err()
			}
		}
		if err, _ := perr.Load().(error); err != nil {
			close(jobs)
			wg.Wait()
			return st, err
		}
		time.Sleep(2 * time.Millisecond)
	}
	close(jobs)
	wg.Wait()
	cancel()
	<-stuckDone
	st.End = time.Now()
	st.Seconds = st.End.Sub(start).Seconds()
	st.Produced = b.produced.Load() - produced0
	st.ProducedPerS = float64(st.Produced) / st.Seconds
	st.Load = loadavg()
	st.Backlog = b.produced.Load() - b.rec.finished.Load()
	for b.produced.Load()-b.rec.finished.Load() > 0 && time.Since(st.End) < 60*time.Second {
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return st, err
		}
	}
	st.DrainS = time.Since(st.End).Seconds()
	st.Kept = st.ProducedPerS >= 0.97*float64(rate) && st.Backlog <= int64(rate) && b.produced.Load()-b.rec.finished.Load() <= 0
	b.stuckMu.Lock()
	st.Stuck = len(b.stuck)
	b.stuckMu.Unlock()
	if err, _ := perr.Load().(error); err != nil {
		return st, err
	}
	// The watch: every incident of the stretch flagged, soon.
	for {
		evs, err := readEvents(b.events)
		if err != nil {
			return st, err
		}
		flagged := map[string]time.Time{}
		for _, e := range evs {
			if e.Event == "flagged" {
				if _, ok := flagged[e.BizID]; !ok {
					flagged[e.BizID] = e.At
				}
			}
		}
		inc := b.rec.incidents()
		var lat []float64
		st.Unflagged = 0
		for _, id := range st.incidents {
			at, ok := flagged[id]
			if !ok || inc[id].IsZero() {
				st.Unflagged++
				continue
			}
			lat = append(lat, float64(at.Sub(inc[id]).Microseconds())/1000)
		}
		d := distOf(lat)
		st.WatchP99, st.WatchMax = d.P99, d.Max
		if st.Unflagged == 0 || time.Since(st.End) > 15*time.Second {
			break
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return st, err
		}
	}
	// The contract's target (docs/watch.md, issue 26): p99 within
	// --interval + 1 s when polling, 1 s from the binlog.
	target := b.o.Interval + time.Second
	if b.o.Mode == "binlog" {
		target = time.Second
	}
	st.WatchKept = st.Unflagged == 0 && st.WatchP99 <= float64(target.Milliseconds())
	return st, nil
}

func (b *bench) settlement(i int64) func() error {
	id := fmt.Sprintf("PAY-L-%d", i)
	m := consumer.Message{BizID: id, MsgID: "m-" + id, AccountID: 100001 + i%1000, Amount: "1.00"}
	topic := b.env.Config.Pipeline("settlement_anchored").Topic
	return func() error {
		b.rec.expect(id, 1)
		b.produced.Add(1)
		b.anchored.Add(1)
		_, _, err := consumer.ProduceMessage(b.producer, topic, m)
		return err
	}
}

// naiveSettlement is seed 000's consumer on its own design (lab
// pipeline settlement): each effect and the state update that records it
// are two statements, so the operation is STATE_BEHIND for the moment
// between them; a triage that falls there flags it (and the next one
// clears it).
func (b *bench) naiveSettlement(i int64) func() error {
	id := fmt.Sprintf("PAY-N-%d", i)
	m := consumer.Message{BizID: id, MsgID: "m-" + id, AccountID: 100001 + i%1000, Amount: "1.00"}
	topic := b.env.Config.Pipeline("settlement").Topic
	return func() error {
		b.rec.expect(id, 1)
		b.produced.Add(1)
		b.naive.Add(1)
		_, _, err := consumer.ProduceMessage(b.producer, topic, m)
		return err
	}
}

func (b *bench) order(ctx context.Context, i int64) func() error {
	id := fmt.Sprintf("ORD-L-%d", i)
	topic := b.env.Config.Pipeline("orders").Topic
	return func() error {
		if _, err := b.env.DB.ExecContext(ctx, "INSERT INTO orders (order_id, status, updated_at) VALUES (?, 'PAID', NOW(3))", id); err != nil {
			return fmt.Errorf("order %s: %v", id, err)
		}
		b.rec.expect(id, 1)
		b.produced.Add(1)
		_, _, err := consumer.ProduceMessage(b.producer, topic, consumer.Message{BizID: id, MsgID: "m-" + id + "-PAID", Event: "PAID", Points: 120})
		return err
	}
}

// orderIncident is seed 003's incident: SHIPPED before PAID, PAID skipped.
func (b *bench) orderIncident(ctx context.Context, i int64) func() error {
	id := fmt.Sprintf("ORD-X-%d", i)
	topic := b.env.Config.Pipeline("orders").Topic
	return func() error {
		if _, err := b.env.DB.ExecContext(ctx, "INSERT INTO orders (order_id, status, updated_at) VALUES (?, 'PAID', NOW(3))", id); err != nil {
			return fmt.Errorf("order %s: %v", id, err)
		}
		b.rec.expect(id, 2)
		b.rec.incident(id)
		b.produced.Add(1)
		// One worker sends both: the same key, the same partition, in order.
		for _, ev := range []string{"SHIPPED", "PAID"} {
			if _, _, err := consumer.ProduceMessage(b.producer, topic, consumer.Message{BizID: id, MsgID: "m-" + id + "-" + ev, Event: ev, Points: 120}); err != nil {
				return err
			}
		}
		return nil
	}
}

// stuckLoop: every StuckEvery, a fulfilment_anchored consumer starts (and
// resumes the previous stuck operation: its lease has ended), takes
// F-S-n, locks WMS and dies before logistics.
func (b *bench) stuckLoop(ctx context.Context) {
	topic := b.env.Config.Pipeline("fulfilment_anchored").Topic
	for n := 1; ; n++ {
		id := fmt.Sprintf("F-S-%d", n)
		f := consumer.NewFaults()
		f.StepDelay(id, "logistics", time.Hour)
		cfg := b.consumerConfig("fulfilment_anchored", fmt.Sprintf("stuck-%d", n), consumer.Fulfilment, consumer.Anchored)
		cfg.Faults, cfg.LeaseTTL = f, time.Second
		c, err := b.start(ctx, cfg)
		if err != nil {
			if ctx.Err() == nil {
				logf("stuck consumer %d: %v", n, err)
			}
			return
		}
		if _, _, err := consumer.ProduceMessage(b.producer, topic, consumer.Message{BizID: id, MsgID: "m-" + id, SKU: "SKU-1", Qty: 1}); err != nil {
			logf("stuck %s: %v", id, err)
			return
		}
		if err := b.rec.waitStep(ctx, id, "wms_lock"); err != nil {
			return
		}
		c.Kill()
		// Its state row as the consumer left it, and the database clock
		// against this process's (the flag's at is the watch's clock).
		var upd, lease sql.NullTime
		var dbNow time.Time
		err = b.env.DB.QueryRowContext(context.Background(),
			"SELECT updated_at, lease_until, NOW(6) FROM ful_state WHERE biz_id = ?", id).Scan(&upd, &lease, &dbNow)
		now := time.Now()
		if err != nil {
			logf("stuck %s: its state row: %v", id, err)
			return
		}
		b.stuckMu.Lock()
		b.stuck = append(b.stuck, stuckOp{BizID: id, UpdatedAt: upd.Time, LeaseTo: lease.Time, DBSkew: dbNow.Sub(now)})
		b.stuckMu.Unlock()
		if err := sleep(ctx, b.o.StuckEvery); err != nil {
			return
		}
	}
}

// quiesce waits (at most 3 minutes) until the watch has caught up: fewer
// than 3 triages in the last second, with no load running.
func (b *bench) quiesce(ctx context.Context) error {
	last := -1.0
	for start := time.Now(); time.Since(start) < 3*time.Minute; {
		_, body := b.get("/metrics")
		n := 0.0
		for _, l := range strings.Split(body, "\n") {
			if f := strings.Fields(l); len(f) == 2 && strings.HasPrefix(f[0], "opctl_watch_triages_total") {
				v, _ := strconv.ParseFloat(f[1], 64)
				n += v
			}
		}
		if last >= 0 && n-last < 3 {
			return nil
		}
		last = n
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	logf("the watch was still triaging 3 minutes after the load stopped")
	return nil
}

// settle waits until the backlog is drained.
func (b *bench) settle(ctx context.Context) error {
	for b.produced.Load()-b.rec.finished.Load() > 0 {
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// sampleStats are the watch's counters at one instant.
type sampleStats struct {
	At       time.Time
	Tables   map[string]int64
	VmHWMKiB float64
	CPUTicks int64
	// DBTicks and LabTicks are the CPU of the private mariadbd and of this
	// process (the lab's consumers, Kafka cluster, services and load):
	// where the machine's two cores go.
	DBTicks  int64
	LabTicks int64
	RowsRead float64 // opctl_watch_rows_read_total, every source
	UserRows map[string]int64
	Handler  int64
	Triages  float64
	// Looked and Fenced are the binlog second looks taken and spared
	// (opctl_watch_binlog_second_looks_total).
	Looked, Fenced float64
	LatCount       float64
	LatSum         float64
	MetricsOK      bool
}

// cpuTicks is the user + system CPU of process pid ("self": this one) in
// USER_HZ ticks, 0 when it cannot be read.
func cpuTicks(pid string) int64 {
	st, err := os.ReadFile("/proc/" + pid + "/stat")
	i := strings.LastIndexByte(string(st), ')')
	if err != nil || i < 0 || i+2 > len(st) {
		return 0
	}
	// The fields after the command's closing parenthesis: utime is the
	// 14th field of the line, stime the 15th.
	f := strings.Fields(string(st[i+2:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stt, _ := strconv.ParseInt(f[12], 10, 64)
	return ut + stt
}

func (b *bench) sample(ctx context.Context) (sampleStats, error) {
	s := sampleStats{At: time.Now(), UserRows: map[string]int64{}}
	if b.watch != nil && b.watch.Process != nil {
		s.CPUTicks = cpuTicks(strconv.Itoa(b.watch.Process.Pid))
	}
	s.DBTicks = cpuTicks(strconv.Itoa(b.srv.Pid()))
	s.LabTicks = cpuTicks("self")
	if code, body := b.get("/metrics"); code == http.StatusOK {
		s.MetricsOK = true
		for _, l := range strings.Split(body, "\n") {
			f := strings.Fields(l)
			if len(f) != 2 {
				continue
			}
			v, _ := strconv.ParseFloat(f[1], 64)
			switch {
			case strings.HasPrefix(f[0], "opctl_watch_rows_read_total"):
				s.RowsRead += v
			case strings.HasPrefix(f[0], "opctl_watch_triages_total"):
				s.Triages += v
			case strings.HasPrefix(f[0], `opctl_watch_binlog_second_looks_total{result="looked"}`):
				s.Looked = v
			case strings.HasPrefix(f[0], `opctl_watch_binlog_second_looks_total{result="fenced"}`):
				s.Fenced = v
			case f[0] == "opctl_watch_detection_latency_seconds_count":
				s.LatCount = v
			case f[0] == "opctl_watch_detection_latency_seconds_sum":
				s.LatSum = v
			}
		}
	}
	if b.watch != nil && b.watch.Process != nil {
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.watch.Process.Pid)); err == nil {
			for _, l := range strings.Split(string(st), "\n") {
				if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
					s.VmHWMKiB, _ = strconv.ParseFloat(f[1], 64)
				}
			}
		}
	}
	var err error
	if s.Tables, err = tableRows(ctx, b.root); err != nil {
		return s, err
	}
	if s.UserRows, err = userRows(ctx, b.root); err != nil {
		return s, err
	}
	if s.Handler, err = handlerReads(ctx, b.root); err != nil {
		return s, err
	}
	return s, nil
}

// userRows is MariaDB's userstat ROWS_READ per user.
func userRows(ctx context.Context, db *sql.DB) (map[string]int64, error) {
	rows, err := db.QueryContext(ctx, "SELECT USER, ROWS_READ FROM information_schema.USER_STATISTICS")
	if err != nil {
		return nil, fmt.Errorf("userstat: %v", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var u string
		var n int64
		if err := rows.Scan(&u, &n); err != nil {
			return nil, err
		}
		out[u] = n
	}
	return out, rows.Err()
}

// tableRows is MariaDB's userstat ROWS_READ per table (every user).
func tableRows(ctx context.Context, db *sql.DB) (map[string]int64, error) {
	rows, err := db.QueryContext(ctx, "SELECT CONCAT(TABLE_SCHEMA, '.', TABLE_NAME), ROWS_READ FROM information_schema.TABLE_STATISTICS")
	if err != nil {
		return nil, fmt.Errorf("userstat: %v", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var t string
		var n int64
		if err := rows.Scan(&t, &n); err != nil {
			return nil, err
		}
		out[t] = n
	}
	return out, rows.Err()
}

// handlerReads sums the server's GLOBAL Handler_read_* (the private
// server: only this benchmark runs on it).
func handlerReads(ctx context.Context, db *sql.DB) (int64, error) {
	return testenv.HandlerReads(ctx, db, "GLOBAL")
}

// event is one watch event line.
type event struct {
	Event    string    `json:"event"`
	At       time.Time `json:"at"`
	Pipeline string    `json:"pipeline"`
	BizID    string    `json:"biz_id"`
	Verdict  string    `json:"verdict"`
	Cause    struct {
		Source      string     `json:"source"`
		CommittedAt *time.Time `json:"committed_at"`
	} `json:"cause"`
	LatencyMS *int64 `json:"latency_ms"`
}

func readEvents(path string) ([]event, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []event
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var e event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			return nil, fmt.Errorf("event line %q: %v", l, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// dist is p50, p99 and max of a sample, in milliseconds.
type dist struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

func distOf(v []float64) dist {
	if len(v) == 0 {
		return dist{}
	}
	sort.Float64s(v)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(v)))) - 1
		return v[max(0, min(i, len(v)-1))]
	}
	return dist{N: len(v), P50: q(0.5), P99: q(0.99), Max: v[len(v)-1]}
}

type summary struct {
	Mode      string   `json:"mode"`
	Interval  string   `json:"interval"`
	OlderThan string   `json:"older_than"`
	WatchArgs []string `json:"watch_args,omitempty"`
	Rate      int      `json:"rate"`
	// ConsumersMax is the highest rate of the ladder the consumers kept
	// up with (the watch may not have).
	ConsumersMax int         `json:"consumers_max_rate"`
	Note         string      `json:"note,omitempty"`
	Ladder       []stepStats `json:"ladder"`
	Run          stepStats   `json:"run"`
	LoadEnd      string      `json:"load_end"`

	// Detection of the wrongly skipped incidents.
	Incidents int `json:"incidents"`
	// Flagged is how many of them the watch flagged WRONGLY_SKIPPED.
	Flagged int `json:"incidents_flagged"`
	// LatencyEvent is the events' latency_ms; LatencyCommit is from the
	// consumer's return from the SKIPPED insert (its commit, autocommit)
	// to the flagged line's at.
	LatencyEvent  dist `json:"latency_event"`
	LatencyCommit dist `json:"latency_commit"`
	// MetricMeanMS is the histogram's sum / count over the run.
	MetricMeanMS float64 `json:"metric_mean_ms"`
	// Stuck: the delay from updated_at + older-than (or the lease's end,
	// when later) to the flagged line.
	Stuck        int  `json:"stuck"`
	StuckFlagged int  `json:"stuck_flagged"`
	StuckDelay   dist `json:"stuck_delay"`
	// Other flags: operations flagged that are no incident (a triage
	// between two writes of a consumer).
	OtherFlags    int      `json:"other_flags"`
	OtherExamples []string `json:"other_examples,omitempty"`
	// OtherFlagged is how long those stayed flagged (until their cleared
	// line); NaiveFlags how many were naive settlement operations, of
	// NaiveOps.
	OtherFlagged dist  `json:"other_flagged_for"`
	NaiveFlags   int   `json:"naive_flags"`
	NaiveOps     int64 `json:"naive_ops"`
	// AnchoredFlags are settlement_anchored operations flagged (no
	// incident was injected there), of AnchoredOps, by verdict.
	AnchoredFlags    int            `json:"anchored_flags"`
	AnchoredOps      int64          `json:"anchored_ops"`
	AnchoredVerdicts map[string]int `json:"anchored_verdicts"`
	DoubleFlags      int            `json:"double_flags"`
	// Causes counts the flagged lines of the run by cause.source.
	Causes map[string]int `json:"causes"`

	CPUPercent float64 `json:"cpu_percent_of_one_core"`
	// DBCPUPercent and LabCPUPercent are the private mariadbd's and the
	// lab's (consumers, Kafka, services, load: this process) CPU over the
	// run, percent of one core.
	DBCPUPercent  float64 `json:"mariadbd_cpu_percent_of_one_core"`
	LabCPUPercent float64 `json:"lab_cpu_percent_of_one_core"`
	RSSMiB        float64 `json:"vmhwm_mib"`
	Ops           int64   `json:"ops_written"`
	SourceRows    float64 `json:"source_rows_read"`
	WatchRows     int64   `json:"watch_user_rows_read"`
	LabRows       int64   `json:"lab_rows_read"`
	Triages       float64 `json:"triages"`
	// SecondLooks and Fenced are the binlog changes looked at again 500 ms
	// later and those whose fence spared it (docs/watch.md#how-it-works).
	SecondLooks  float64 `json:"binlog_second_looks"`
	Fenced       float64 `json:"binlog_fenced"`
	SourcePerOp  float64 `json:"source_rows_per_op"`
	WatchPerOp   float64 `json:"watch_rows_per_op"`
	WatchPerHour float64 `json:"watch_rows_per_hour"`

	// TableRows are the rows read per table during the run, by everyone
	// (userstat's TABLE_STATISTICS): where the reads go.
	TableRows map[string]int64 `json:"table_rows_read"`

	Cron cronStats `json:"cron"`
}

type cronStats struct {
	Every        string  `json:"every"`
	Since        string  `json:"since"`
	Seconds      float64 `json:"seconds"`
	Exit         int     `json:"exit"`
	Targets      int     `json:"targets"`
	UserRows     int64   `json:"user_rows_read"`
	HandlerRows  int64   `json:"handler_read_delta"`
	OpsInWindow  int64   `json:"ops_in_window"`
	RowsPerOp    float64 `json:"rows_per_op"`
	RowsPerHour  float64 `json:"rows_per_hour_at_rate"`
	Latency      dist    `json:"latency"`
	LatencyStuck dist    `json:"latency_stuck"`
	// StuckSeenShare is the share of (stuck operation, phase) pairs in
	// which a cron run falls while the operation is stuck.
	StuckSeenShare float64 `json:"stuck_seen_share"`
	Load           string  `json:"load"`
}

func (b *bench) analyse(ctx context.Context, sum *summary, m0, m1 sampleStats, st stepStats) error {
	evs, err := readEvents(b.events)
	if err != nil {
		return err
	}
	hz := int64(100) // USER_HZ
	wall := m1.At.Sub(m0.At).Seconds()
	sum.CPUPercent = 100 * float64(m1.CPUTicks-m0.CPUTicks) / float64(hz) / wall
	sum.DBCPUPercent = 100 * float64(m1.DBTicks-m0.DBTicks) / float64(hz) / wall
	sum.LabCPUPercent = 100 * float64(m1.LabTicks-m0.LabTicks) / float64(hz) / wall
	sum.RSSMiB = m1.VmHWMKiB / 1024
	sum.TableRows = map[string]int64{}
	for t, n := range m1.Tables {
		if d := n - m0.Tables[t]; d > 0 {
			sum.TableRows[t] = d
		}
	}
	sum.Ops = st.Produced
	sum.SourceRows = m1.RowsRead - m0.RowsRead
	sum.WatchRows = m1.UserRows["opctl_watch"] - m0.UserRows["opctl_watch"]
	sum.LabRows = m1.UserRows["root"] - m0.UserRows["root"]
	sum.Triages = m1.Triages - m0.Triages
	sum.SecondLooks, sum.Fenced = m1.Looked-m0.Looked, m1.Fenced-m0.Fenced
	if sum.Ops > 0 {
		sum.SourcePerOp = sum.SourceRows / float64(sum.Ops)
		sum.WatchPerOp = float64(sum.WatchRows) / float64(sum.Ops)
		sum.WatchPerHour = float64(sum.WatchRows) / wall * 3600
	}
	if n := m1.LatCount - m0.LatCount; n > 0 {
		sum.MetricMeanMS = 1000 * (m1.LatSum - m0.LatSum) / n
	}
	// Incidents: their skipped commit (the consumer's event), their flag.
	// The run's incidents (the ladder's are its own).
	all := b.rec.incidents()
	inc := map[string]time.Time{}
	for _, id := range st.incidents {
		inc[id] = all[id]
	}
	sum.Incidents = len(inc)
	sum.Causes = map[string]int{}
	flagged := map[string]event{}
	last := map[string]string{}
	for _, e := range evs {
		if e.At.Before(st.Start) {
			continue
		}
		if e.Event == "flagged" && last[e.BizID] == "flagged" {
			sum.DoubleFlags++
		}
		if e.Event == "flagged" || e.Event == "cleared" {
			last[e.BizID] = e.Event
		}
		if e.Event != "flagged" {
			continue
		}
		sum.Causes[e.Cause.Source]++
		if _, ok := flagged[e.BizID]; !ok {
			flagged[e.BizID] = e
		}
	}
	var latE, latC []float64
	for id, skippedAt := range inc {
		e, ok := flagged[id]
		if !ok || e.Verdict != "WRONGLY_SKIPPED" {
			continue
		}
		sum.Flagged++
		if e.LatencyMS != nil {
			latE = append(latE, float64(*e.LatencyMS))
		}
		if !skippedAt.IsZero() {
			latC = append(latC, float64(e.At.Sub(skippedAt).Microseconds())/1000)
		}
	}
	sum.LatencyEvent, sum.LatencyCommit = distOf(latE), distOf(latC)
	b.stuckMu.Lock()
	stuck := append([]stuckOp(nil), b.stuck...)
	b.stuckMu.Unlock()
	sum.Stuck = len(stuck)
	var sd []float64
	isStuck := map[string]bool{}
	b.clearedAt = map[string]time.Time{}
	for _, e := range evs {
		if e.Event == "cleared" {
			b.clearedAt[e.BizID] = e.At
		}
	}
	for _, s := range stuck {
		isStuck[s.BizID] = true
		e, ok := flagged[s.BizID]
		if !ok {
			continue
		}
		sum.StuckFlagged++
		due := s.UpdatedAt.Add(b.o.OlderThan)
		if s.LeaseTo.After(due) {
			due = s.LeaseTo
		}
		// Both in the database's clock: at minus the skew.
		sd = append(sd, float64(e.At.Add(s.DBSkew).Sub(due).Microseconds())/1000)
	}
	sum.StuckDelay = distOf(sd)
	sum.NaiveOps = b.naive.Load() - b.naive0
	if b.o.Mode == "binlog" && sum.Causes["binlog"] == 0 {
		return fmt.Errorf("-mode binlog: no flagged line has cause.source binlog (causes %v): the watch did not follow the binlog; -watch-args %q", sum.Causes, strings.Join(b.o.WatchArgs, " "))
	}
	var tr []float64
	sum.AnchoredVerdicts = map[string]int{}
	sum.AnchoredOps = b.anchored.Load() - b.anchored0
	for id, e := range flagged {
		if _, ok := inc[id]; ok || isStuck[id] {
			continue
		}
		switch {
		case strings.HasPrefix(id, "PAY-N-"):
			sum.NaiveFlags++
		case strings.HasPrefix(id, "PAY-L-"):
			sum.AnchoredFlags++
			sum.AnchoredVerdicts[e.Verdict]++
		}
		if c, ok := b.clearedAt[id]; ok && c.After(e.At) {
			tr = append(tr, float64(c.Sub(e.At).Microseconds())/1000)
		}
		sum.OtherFlags++
		if len(sum.OtherExamples) < 5 {
			sum.OtherExamples = append(sum.OtherExamples, id+" "+e.Verdict+" ("+e.Cause.Source+")")
		}
	}
	sum.OtherFlagged = distOf(tr)
	return nil
}

// cron runs `opctl reconcile` once over the run's data, as the 5-minute
// cron would (its window: the whole run), counts its rows, and computes
// the latency the cron would have had for each target of the run: from the
// moment it became a target to the next multiple of CronEvery of the wall
// clock (*/5 in a crontab), plus the run's own time.
func (b *bench) cron(ctx context.Context, sum *summary, st stepStats) error {
	c := &sum.Cron
	c.Every, c.Since = b.o.CronEvery.String(), "1h"
	c.Load = loadavg()
	u0, err := userRows(ctx, b.root)
	if err != nil {
		return err
	}
	h0, err := handlerReads(ctx, b.root)
	if err != nil {
		return err
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, b.o.Opctl, "--config", b.cronCfg, "reconcile", "--since", "1h", "--older-than", fmtDur(b.o.OlderThan), "-o", "json")
	out, err := cmd.Output()
	c.Seconds = time.Since(start).Seconds()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		c.Exit = ee.ExitCode()
	} else if err != nil {
		return err
	}
	h1, err := handlerReads(ctx, b.root)
	if err != nil {
		return err
	}
	u1, err := userRows(ctx, b.root)
	if err != nil {
		return err
	}
	c.UserRows = u1["opctl_cron"] - u0["opctl_cron"]
	c.HandlerRows = h1 - h0
	var rep struct {
		Targets []json.RawMessage `json:"targets"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		return fmt.Errorf("opctl reconcile -o json: exit %d, not JSON: %v", c.Exit, err)
	}
	c.Targets = len(rep.Targets)
	c.OpsInWindow = b.produced.Load() + int64(len(b.stuck))
	if c.OpsInWindow > 0 {
		c.RowsPerOp = float64(c.UserRows) / float64(c.OpsInWindow)
	}
	// A cron every CronEvery over a window of 2×CronEvery (so that one
	// late run misses nothing) at the measured rate.
	runsPerHour := float64(time.Hour / b.o.CronEvery)
	c.RowsPerHour = c.RowsPerOp * float64(sum.Rate) * (2 * b.o.CronEvery).Seconds() * runsPerHour
	// The cron's phase is unknown: every whole second of its period is
	// taken as its phase in turn (a */5 crontab runs at one of them), and
	// the latencies of all the (target, phase) pairs make the
	// distribution.
	period := b.o.CronEvery
	next := func(t time.Time, phase time.Duration) time.Time { return nextRun(t, period, phase) }
	phases := int(period / time.Second)
	var lat []float64
	times := b.rec.incidents()
	for _, id := range st.incidents {
		at := times[id]
		if at.IsZero() {
			continue
		}
		for ph := 0; ph < phases; ph++ {
			lat = append(lat, float64(next(at, time.Duration(ph)*time.Second).Sub(at).Milliseconds())+c.Seconds*1000)
		}
	}
	c.Latency = distOf(lat)
	// A stuck operation is a target from its deadline until it is resumed
	// (the watch's cleared line, or the end of the run): a cron run sees
	// it only when one falls in between.
	var ls []float64
	var seen, all int
	for _, s := range b.stuck {
		due := s.UpdatedAt.Add(b.o.OlderThan).Add(-s.DBSkew)
		if s.LeaseTo.Add(-s.DBSkew).After(due) {
			due = s.LeaseTo.Add(-s.DBSkew)
		}
		until := b.clearedAt[s.BizID]
		for ph := 0; ph < phases; ph++ {
			all++
			n := next(due, time.Duration(ph)*time.Second)
			if !until.IsZero() && n.After(until) {
				continue
			}
			seen++
			ls = append(ls, float64(n.Sub(due).Milliseconds())+c.Seconds*1000)
		}
	}
	if all > 0 {
		c.StuckSeenShare = float64(seen) / float64(all)
	}
	c.LatencyStuck = distOf(ls)
	return nil
}

// nextRun is the first run after t of a cron that runs every period at
// phase past each multiple of period (since the Unix epoch; */5 with phase
// 0 runs at :00, :05, ...). A run exactly at t is not after it.
func nextRun(t time.Time, period, phase time.Duration) time.Time {
	n := t.Add(-phase).Truncate(period).Add(phase)
	if !n.After(t) {
		n = n.Add(period)
	}
	return n
}

func report(w io.Writer, s *summary) {
	fmt.Fprintf(w, "\nmode %s, --interval %s, --older-than %s, rate %d ops/s (%.0f produced/s over %.0fs, %d ops; backlog %d at the end, drained in %.1fs); load %s during, %s after\n",
		s.Mode, s.Interval, s.OlderThan, s.Rate, s.Run.ProducedPerS, s.Run.Seconds, s.Run.Produced, s.Run.Backlog, s.Run.DrainS, s.Run.Load, s.LoadEnd)
	fmt.Fprintf(w, "wrongly skipped: %d injected, %d flagged; latency (event latency_ms) p50 %.0f p99 %.0f max %.0f ms; from the consumer's commit p50 %.0f p99 %.0f max %.0f ms; histogram mean %.0f ms\n",
		s.Incidents, s.Flagged, s.LatencyEvent.P50, s.LatencyEvent.P99, s.LatencyEvent.Max, s.LatencyCommit.P50, s.LatencyCommit.P99, s.LatencyCommit.Max, s.MetricMeanMS)
	fmt.Fprintf(w, "stuck: %d, %d flagged; delay after crossing --older-than p50 %.0f p99 %.0f max %.0f ms\n",
		s.Stuck, s.StuckFlagged, s.StuckDelay.P50, s.StuckDelay.P99, s.StuckDelay.Max)
	fmt.Fprintf(w, "other operations flagged: %d (%d of %d naive settlement operations, %d of %d anchored ones %v) %v, flagged for p50 %.0f max %.0f ms; flagged twice without a clear: %d; flags by cause %v\n",
		s.OtherFlags, s.NaiveFlags, s.NaiveOps, s.AnchoredFlags, s.AnchoredOps, s.AnchoredVerdicts, s.OtherExamples, s.OtherFlagged.P50, s.OtherFlagged.Max, s.DoubleFlags, s.Causes)
	fmt.Fprintf(w, "watch: CPU %.1f%% of one core, VmHWM %.1f MiB; rows: source %.0f (%.2f/op), watch user %d (%.2f/op, %.3g/h), %0.f triages\n",
		s.CPUPercent, s.RSSMiB, s.SourceRows, s.SourcePerOp, s.WatchRows, s.WatchPerOp, s.WatchPerHour, s.Triages)
	if s.SecondLooks+s.Fenced > 0 {
		fmt.Fprintf(w, "binlog second looks: %.0f taken, %.0f spared by the fence\n", s.SecondLooks, s.Fenced)
	}
	fmt.Fprintf(w, "machine: mariadbd CPU %.1f%%, lab (consumers, Kafka, services, load) %.1f%%, watch %.1f%% of one core (2 cores: 200%%)\n",
		s.DBCPUPercent, s.LabCPUPercent, s.CPUPercent)
	c := s.Cron
	fmt.Fprintf(w, "reconcile --since %s once over the run: %.2fs, exit %d, %d targets, %d rows (user), %d Handler_read; %.2f rows/op → %.3g rows/h as a cron every %s over 2×%s at %d ops/s; latency p50 %.0f p99 %.0f max %.0f ms; a stuck operation seen by a run in %.1f%% of the phases, then after p50 %.0f max %.0f ms\n",
		c.Since, c.Seconds, c.Exit, c.Targets, c.UserRows, c.HandlerRows, c.RowsPerOp, c.RowsPerHour, c.Every, c.Every, s.Rate,
		c.Latency.P50, c.Latency.P99, c.Latency.Max, 100*c.StuckSeenShare, c.LatencyStuck.P50, c.LatencyStuck.Max)
}

// recorder drains the consumers' events: which operations finished, when
// each incident's SKIPPED row was written, when a step was done.
type recorder struct {
	mu       sync.Mutex
	ch       chan consumer.Event
	want     map[string]int // messages an operation still has to commit
	inc      map[string]time.Time
	steps    map[string]chan struct{}
	finished atomic.Int64
	cons     []*consumer.Consumer
}

func newRecorder() *recorder {
	r := &recorder{ch: make(chan consumer.Event, 1<<16), want: map[string]int{}, inc: map[string]time.Time{},
		steps: map[string]chan struct{}{}}
	go r.loop()
	return r
}

func (r *recorder) channel() chan<- consumer.Event { return r.ch }
func (r *recorder) own(c *consumer.Consumer)       { r.mu.Lock(); r.cons = append(r.cons, c); r.mu.Unlock() }

func (r *recorder) stopAll() {
	r.mu.Lock()
	cs := r.cons
	r.cons = nil
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); c.Kill() }()
	}
	wg.Wait()
}

func (r *recorder) expect(id string, msgs int) {
	r.mu.Lock()
	r.want[id] += msgs
	r.mu.Unlock()
}

func (r *recorder) incident(id string) {
	r.mu.Lock()
	if _, ok := r.inc[id]; !ok {
		r.inc[id] = time.Time{}
	}
	r.mu.Unlock()
}

func (r *recorder) incidents() map[string]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]time.Time, len(r.inc))
	for k, v := range r.inc {
		out[k] = v
	}
	return out
}

func (r *recorder) stepChan(key string) chan struct{} {
	ch, ok := r.steps[key]
	if !ok {
		ch = make(chan struct{})
		r.steps[key] = ch
	}
	return ch
}

// waitStep waits until a consumer reports step of id done.
func (r *recorder) waitStep(ctx context.Context, id, step string) error {
	r.mu.Lock()
	ch := r.stepChan(id + "/" + step)
	r.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s: step %s not done in 30s", id, step)
	}
}

func (r *recorder) loop() {
	for ev := range r.ch {
		r.mu.Lock()
		switch ev.What {
		case "committed":
			if n, ok := r.want[ev.BizID]; ok && n > 0 {
				r.want[ev.BizID] = n - 1
				if n == 1 {
					delete(r.want, ev.BizID)
					r.finished.Add(1)
				}
			}
		case "skipped":
			if at, ok := r.inc[ev.BizID]; ok && at.IsZero() {
				r.inc[ev.BizID] = ev.At
			}
		case "step_done":
			ch := r.stepChan(ev.BizID + "/" + ev.Step)
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
		r.mu.Unlock()
	}
}
