package lab_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/opctl-dev/opctl/cmd"
	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/lab"
	"github.com/opctl-dev/opctl/lab/consumer"
	"github.com/opctl-dev/opctl/lab/testenv"
)

// TestWatchThroughOutages is the reliability test "MySQL and Kafka down
// and back" (docs/watch.md#when-mysql-or-kafka-is-down): `opctl watch`
// reads MySQL through a proxy the test takes down and brings back at the
// same address, and the lab's Kafka has an Outage. During each outage an
// operation becomes a target (a state row written straight to MySQL,
// left to go stuck); the watch keeps running, /readyz answers 503 naming
// the source, opctl_watch_up{source} is 0 and stderr says it lost it;
// once the source is back it says so, turns ready, and the operation
// written during the outage is flagged.
func TestWatchThroughOutages(t *testing.T) {
	testenv.MySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, err := lab.Start(ctx, lab.Options{MySQLDSN: testenv.RootDSN(), Timings: consumer.FastTimings()})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	dsn, err := mysql.ParseDSN(env.DSN)
	if err != nil {
		t.Fatal(err)
	}
	mysqlAddr := dsn.Addr
	proxy := testenv.NewStallProxy(t, mysqlAddr, -1)
	dsn.Addr = proxy.Addr
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	events := filepath.Join(t.TempDir(), "events.jsonl")
	stderr := &lockedBuf{}
	ios := &iostreams.IOStreams{In: strings.NewReader(""), Out: &lockedBuf{}, ErrOut: stderr}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan int, 1)
	go func() {
		done <- cmd.Run(wctx, ios, []string{"--config", env.ConfigPath, "--mysql-dsn", dsn.FormatDSN(), "--timeout", "2s",
			"watch", "--pipeline", "settlement", "--listen", addr, "--events", events,
			"--interval", "200ms", "--older-than", "1s", "--since", "1d", "--state", "none"})
	}()
	get := func(path string) (int, string) {
		c := &http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	until := func(what string, f func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			select {
			case code := <-done:
				t.Fatalf("the watch ended (exit %d) while waiting for %s; stderr:\n%s", code, what, stderr)
			default:
			}
			if f() {
				return
			}
		}
		_, m := get("/metrics")
		_, r := get("/readyz")
		b, _ := os.ReadFile(events)
		t.Fatalf("after 60s: %s\n/readyz: %s\nevents:\n%s\nstderr:\n%s\nmetrics:\n%s", what, r, b, stderr, m)
	}
	ready := func() bool { code, _ := get("/readyz"); return code == http.StatusOK }
	metric := func(line string) func() bool {
		return func() bool { _, m := get("/metrics"); return strings.Contains(m, line+"\n") }
	}
	flagged := func(id string) func() bool {
		return func() bool {
			b, _ := os.ReadFile(events)
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, `"event":"flagged"`) && strings.Contains(l, `"biz_id":"`+id+`"`) {
					return true
				}
			}
			return false
		}
	}
	// A state row left half-way: stuck once older than --older-than.
	inject := func(id string) {
		t.Helper()
		if _, err := env.DB.ExecContext(ctx, "INSERT INTO biz_operation (biz_id, status, version, msg_id, src_partition, src_offset, created_at, updated_at) VALUES (?, 'DEBIT_DONE', 1, ?, 0, 0, NOW(3), NOW(3))", id, "m-"+id); err != nil {
			t.Fatal(err)
		}
	}
	until("ready", ready)
	until("opctl_watch_up mysql 1", metric(`opctl_watch_up{source="mysql"} 1`))

	// MySQL down: the proxy closes (connection refused), an operation goes
	// stuck meanwhile.
	proxy.Close()
	inject("PAY-OUT-M")
	until("/readyz 503 naming mysql", func() bool {
		code, body := get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "mysql does not answer")
	})
	until("opctl_watch_up mysql 0", metric(`opctl_watch_up{source="mysql"} 0`))
	time.Sleep(1500 * time.Millisecond) // PAY-OUT-M is past --older-than while MySQL is down
	if flagged("PAY-OUT-M")() {
		t.Fatal("flagged while MySQL was down")
	}
	// MySQL back at the same address.
	back, err := testenv.StartStallProxyAt(proxy.Addr, mysqlAddr, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	until("PAY-OUT-M flagged after MySQL is back", flagged("PAY-OUT-M"))
	until("ready after MySQL is back", ready)
	until("opctl_watch_up mysql 1 again", metric(`opctl_watch_up{source="mysql"} 1`))
	for _, want := range []string{"watch: mysql lost: ", "watch: mysql regained"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}

	// Kafka down: every request's connection is dropped; an operation goes
	// stuck meanwhile, and its triage cannot read Kafka.
	restore := env.Cluster.Outage()
	inject("PAY-OUT-K")
	until("/readyz 503 naming kafka", func() bool {
		code, body := get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "kafka does not answer")
	})
	until("opctl_watch_up kafka 0", metric(`opctl_watch_up{source="kafka"} 0`))
	restore()
	until("ready after Kafka is back", ready)
	until("opctl_watch_up kafka 1", metric(`opctl_watch_up{source="kafka"} 1`))
	until("PAY-OUT-K flagged after Kafka is back", flagged("PAY-OUT-K"))
	if _, body := get("/targets"); !strings.Contains(body, `"biz_id":"PAY-OUT-K"`) || !strings.Contains(body, `"biz_id":"PAY-OUT-M"`) {
		t.Errorf("/targets after both outages: %s", body)
	}
	for _, want := range []string{"watch: kafka lost: ", "watch: kafka regained"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	b, _ := os.ReadFile(events)
	t.Logf("events:\n%s\nstderr:\n%s", b, stderr)
	stop()
	select {
	case code := <-done:
		if code != 130 {
			t.Errorf("watch exit %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not stop")
	}
}
