package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-sql-driver/mysql"

	"github.com/opctl-dev/opctl/cmd"
	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/reconcile"
)

// measure is one side's run: wall time, rows examined (the sum of
// Handler_read_*), the client's peak RSS, and what it found (biz_id →
// verdict).
type measure struct {
	Wall   time.Duration
	Rows   int64
	RSSMiB float64 // 0: not measured (in-process)
	Exit   int
	Found  map[string]string
	// opctl: each check's summary and the probe calls it made.
	Checks  []reconcile.CheckStats
	Seconds float64 // the run's own summary.seconds
	Probes  map[string]int
	// naive: each part (the topic dump, its load, each statement).
	Parts []part
}

type part struct {
	Label string
	Wall  time.Duration
	Rows  int64
	Found int
}

// queryer is a *sql.DB or a *sql.Conn.
type queryer interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// handlerReads sums Handler_read_* of scope (SESSION or GLOBAL).
func handlerReads(ctx context.Context, q queryer, scope string) (int64, error) {
	return testenv.HandlerReads(ctx, q, scope)
}

// statusCost is what one handlerReads itself adds to the counters of
// scope (reading the status table): subtracted from every delta.
func statusCost(ctx context.Context, q queryer, scope string) (int64, error) {
	a, err := handlerReads(ctx, q, scope)
	if err != nil {
		return 0, err
	}
	b, err := handlerReads(ctx, q, scope)
	return b - a, err
}

// runOpctl runs `opctl reconcile --config <preset> <args> -o json` with
// the preset's environment: the built binary bin (its peak RSS from
// wait4's rusage, as /usr/bin/time -v reports it), or in this process
// when bin is empty. Rows examined are the GLOBAL delta of the server
// (opctl uses several connections): run the benchmark on a server
// nothing else uses (-private) for a clean count.
func runOpctl(ctx context.Context, e *env, bin string, vars map[string]string, args []string) (measure, error) {
	var m measure
	cost, err := statusCost(ctx, e.root, "GLOBAL")
	if err != nil {
		return m, err
	}
	before, err := handlerReads(ctx, e.root, "GLOBAL")
	if err != nil {
		return m, err
	}
	e.probes.takeCalls()
	args = append([]string{"--config", e.config, "reconcile"}, append(args, "-o", "json")...)
	var out, stderr bytes.Buffer
	start := time.Now()
	if bin != "" {
		c := exec.CommandContext(ctx, bin, args...)
		c.Env = os.Environ()
		for k, v := range vars {
			c.Env = append(c.Env, k+"="+v)
		}
		c.Stdout, c.Stderr = &out, &stderr
		err := c.Run()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			m.Exit = ee.ExitCode()
		case err != nil:
			return m, err
		}
		if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
			m.RSSMiB = float64(ru.Maxrss) / 1024 // KiB on Linux
		}
	} else {
		for k, v := range vars {
			os.Setenv(k, v)
		}
		ios, _, o, eo := iostreams.Test()
		m.Exit = cmd.Run(ctx, ios, args)
		out, stderr = *o, *eo
	}
	m.Wall = time.Since(start)
	after, err := handlerReads(ctx, e.root, "GLOBAL")
	if err != nil {
		return m, err
	}
	m.Rows = after - before - cost
	m.Probes = e.probes.takeCalls()
	var rep struct {
		Targets []reconcile.Target `json:"targets"`
		Summary reconcile.Summary  `json:"summary"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return m, fmt.Errorf("opctl reconcile: exit %d, not JSON: %v\n%s\n%s", m.Exit, err, tail(out.String()), tail(stderr.String()))
	}
	m.Found = map[string]string{}
	for _, t := range rep.Targets {
		if v, ok := m.Found[t.BizID]; ok && v != string(t.Verdict) {
			m.Found[t.BizID] = v + "+" + string(t.Verdict)
			continue
		}
		m.Found[t.BizID] = string(t.Verdict)
	}
	m.Checks, m.Seconds = rep.Summary.Checks, rep.Summary.Seconds
	return m, nil
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// runNaive runs the seed's naive side on one connection: the topic dump
// and its load when the seed needs them, then each statement; rows
// examined are that session's Handler_read_* delta.
func runNaive(ctx context.Context, e *env, d *seedDef) (measure, error) {
	m := measure{Found: map[string]string{}}
	conn, err := e.db.Conn(ctx)
	if err != nil {
		return m, err
	}
	defer conn.Close()
	cost, err := statusCost(ctx, conn, "SESSION")
	if err != nil {
		return m, err
	}
	reads := func() int64 {
		n, _ := handlerReads(ctx, conn, "SESSION")
		return n
	}
	start := time.Now()
	if d.dumpLoad != "" {
		t0 := time.Now()
		dump, recs, err := dumpTopic(e.kafka.Brokers, d.Topic)
		if err != nil {
			return m, err
		}
		m.Parts = append(m.Parts, part{Label: fmt.Sprintf("dump the topic (%d records, as kcat -C -e -f '%%k\\t%%s\\n')", recs), Wall: time.Since(t0)})
		mysql.RegisterReaderHandler("dump", func() io.Reader { return bytes.NewReader(dump) })
		defer mysql.DeregisterReaderHandler("dump")
		t0, r0 := time.Now(), reads()
		if _, err := conn.ExecContext(ctx, d.dumpDDL); err != nil {
			return m, err
		}
		if _, err := conn.ExecContext(ctx, d.dumpLoad); err != nil {
			return m, fmt.Errorf("%s: %v", d.dumpLoad, err)
		}
		m.Parts = append(m.Parts, part{Label: "LOAD DATA LOCAL INFILE into a temporary table", Wall: time.Since(t0), Rows: reads() - r0 - cost})
		defer conn.ExecContext(ctx, "DROP TEMPORARY TABLE IF EXISTS "+d.dumpTable) //nolint:errcheck // the session ends with it
	}
	for _, q := range d.naive {
		t0, r0 := time.Now(), reads()
		rows, err := conn.QueryContext(ctx, q.SQL)
		if err != nil {
			return m, fmt.Errorf("%s: %v", q.SQL, err)
		}
		n := 0
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return m, err
			}
			if v, ok := m.Found[id]; ok && v != q.Verdict {
				m.Found[id] = v + "+" + q.Verdict
			} else {
				m.Found[id] = q.Verdict
			}
			n++
		}
		if err := rows.Err(); err != nil {
			return m, err
		}
		rows.Close()
		m.Parts = append(m.Parts, part{Label: q.Label, Wall: time.Since(t0), Rows: reads() - r0 - cost, Found: n})
	}
	m.Wall = time.Since(start)
	for _, p := range m.Parts {
		m.Rows += p.Rows
	}
	return m, nil
}

// dumpTopic reads every record of topic, every partition from its log
// start to its end, as "key\tvalue\n" lines: what `kcat -C -e -f
// '%k\t%s\n'` writes.
func dumpTopic(brokers []string, topic string) ([]byte, int, error) {
	conf := sarama.NewConfig()
	conf.Version = sarama.V3_5_0_0
	conf.ClientID = "opctl-seedbench-dump"
	conf.Consumer.Fetch.Default = 4 << 20
	conf.Consumer.MaxWaitTime = 20 * time.Millisecond
	client, err := sarama.NewClient(brokers, conf)
	if err != nil {
		return nil, 0, err
	}
	defer client.Close()
	c, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return nil, 0, err
	}
	defer c.Close()
	parts, err := client.Partitions(topic)
	if err != nil {
		return nil, 0, err
	}
	type claim struct {
		pc  sarama.PartitionConsumer
		end int64
	}
	var claims []claim
	defer func() {
		for _, cl := range claims {
			cl.pc.Close()
		}
	}()
	for _, p := range parts {
		start, err := client.GetOffset(topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, 0, err
		}
		end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return nil, 0, err
		}
		if end <= start {
			continue
		}
		pc, err := c.ConsumePartition(topic, p, start)
		if err != nil {
			return nil, 0, err
		}
		claims = append(claims, claim{pc, end})
	}
	var buf bytes.Buffer
	n := 0
	for _, cl := range claims {
		for msg := range cl.pc.Messages() {
			buf.Write(msg.Key)
			buf.WriteByte('\t')
			buf.Write(msg.Value)
			buf.WriteByte('\n')
			n++
			if msg.Offset >= cl.end-1 {
				break
			}
		}
	}
	return buf.Bytes(), n, nil
}

// exactness compares found with the manifest: planted operations not
// found (or found with another verdict), and operations found that were
// not planted.
type exactness struct {
	Planted, Found, Missed, Extra, Wrong int
	// MissedBy counts the misses (and wrong verdicts) by planted verdict.
	MissedBy map[string]int
	Examples []string
}

func (x exactness) Exact() bool { return x.Missed == 0 && x.Extra == 0 && x.Wrong == 0 }

func (x exactness) String() string {
	if x.Exact() {
		return fmt.Sprintf("yes (%d/%d)", x.Found, x.Planted)
	}
	s := fmt.Sprintf("no: %d planted, %d missed, %d extra, %d with another verdict", x.Planted, x.Missed, x.Extra, x.Wrong)
	if len(x.MissedBy) > 0 {
		var by []string
		for v, n := range x.MissedBy {
			by = append(by, fmt.Sprintf("%s %d", v, n))
		}
		sort.Strings(by)
		s += "; not found as planted: " + strings.Join(by, ", ")
	}
	if len(x.Examples) > 0 {
		s += " (" + strings.Join(x.Examples, ", ") + ")"
	}
	return s
}

func compare(manifest []want, found map[string]string) exactness {
	x := exactness{Planted: len(manifest), MissedBy: map[string]int{}}
	planted := map[string]string{}
	for _, w := range manifest {
		planted[w.BizID] = w.Verdict
	}
	var ex []string
	for _, w := range manifest {
		switch v, ok := found[w.BizID]; {
		case !ok:
			x.Missed++
			x.MissedBy[w.Verdict]++
			ex = append(ex, "missed "+w.BizID+" "+w.Verdict)
		case v != w.Verdict:
			x.Wrong++
			x.MissedBy[w.Verdict]++
			ex = append(ex, w.BizID+" "+v+" want "+w.Verdict)
		default:
			x.Found++
		}
	}
	for id, v := range found {
		if _, ok := planted[id]; !ok {
			x.Extra++
			ex = append(ex, "extra "+id+" "+v)
		}
	}
	sort.Strings(ex)
	if len(ex) > 4 {
		ex = append(ex[:4], "…")
	}
	x.Examples = ex
	return x
}
