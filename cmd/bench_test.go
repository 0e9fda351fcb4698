package cmd

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/connect"
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
)

// benchFixture is seed 001's F-1: one operation, four steps (order row, WMS
// lock with a {biz_id} probe, logistics with an intent, outbox notice), its
// message produced and searched for by timestamp, offset committed.
func benchFixture(b *testing.B) (*fixture, func() []string) {
	wms := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"count": 2}`)
	}))
	b.Cleanup(wms.Close)
	f := newFixtureTB(b, "fulfilment", "order-fulfilment", "${OPCTL_WMS_URL:-http://127.0.0.1:8082}", wms.URL)
	ts := f.createdAt("SELECT created_at FROM fulfil_state WHERE biz_id = 'F-1'")
	p, off := f.produce("F-1", "fm-1", ts)
	f.k.Commit(b, "fulfilment-consumer", "order-fulfilment", p, off+1)
	args := func() []string {
		return []string{"--config", f.cfg, "--mysql-dsn", f.db.DSN, "--brokers", strings.Join(f.k.Brokers, ","), "where", "F-1", "-o", "json"}
	}
	return f, args
}

// BenchmarkWhere measures `opctl where` for one four-step operation against
// MariaDB and kfake over TCP:
//   - in-process: a whole command run (config load, new MySQL and Kafka
//     clients, every query, the search, the probe, JSON rendering);
//   - warm: Triage with connected clients, reporting the sequential MySQL
//     statement waits on the critical path (mysql-seq/op);
//   - process: the built binary, start to exit, reporting the median.
func BenchmarkWhere(b *testing.B) {
	f, args := benchFixture(b)

	b.Run("in-process", func(b *testing.B) {
		for b.Loop() {
			ios, _, out, errOut := iostreams.Test()
			if code := Run(context.Background(), ios, args()); code != ExitAttention {
				b.Fatalf("exit %d: %s %s", code, out, errOut)
			}
		}
	})

	b.Run("warm", func(b *testing.B) {
		cfg, err := config.Load(f.cfg)
		if err != nil {
			b.Fatal(err)
		}
		cfg.MySQL.DSN, cfg.Kafka.Brokers = f.db.DSN, f.k.Brokers
		c, err := connect.Open(cfg, connect.Options{Timeout: 5 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		tr := c.Triage()
		var stats mysqlsrc.ReadStats
		for b.Loop() {
			t, err := tr.Triage(context.Background(), "F-1", "fulfilment")
			if err != nil || t.Ops[0].Report.Verdict.Code != "DUPLICATE_EFFECT" {
				b.Fatalf("%v %+v", err, t)
			}
			_ = NextFlags{}.Reports(t) // where's NEXT: the planner's
			stats = c.Reader.Stats()
		}
		b.ReportMetric(float64(stats.CriticalPath), "mysql-seq/op")
		b.ReportMetric(float64(stats.Statements), "mysql-stmts/op")
	})

	b.Run("process", func(b *testing.B) {
		bin := buildOpctl(b, "")
		var ds []time.Duration
		for b.Loop() {
			start := time.Now()
			c := exec.Command(bin, args()...)
			out, err := c.Output()
			ds = append(ds, time.Since(start))
			if c.ProcessState.ExitCode() != ExitAttention {
				b.Fatalf("exit %v: %s", err, out)
			}
		}
		slices.Sort(ds)
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "median-ms")
	})
}
