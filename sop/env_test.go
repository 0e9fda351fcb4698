package sop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/cmd"
	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sop"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/connect"
	"github.com/opctl-dev/opctl/sources/schema"
)

// env is a seed fixture of testdata/ on a fresh MariaDB database and a
// kfake cluster reached over TCP, with an opctl.yaml (sop.runs_dir in a
// temporary directory) that `opctl` commands run against.
type env struct {
	t       *testing.T
	db      *testenv.DB
	k       *testenv.Kafka
	cfgPath string
	cfg     *config.Config
	runs    string
	parts   int32
}

func td(parts ...string) string {
	return filepath.Join(append([]string{"..", "testdata"}, parts...)...)
}

// newEnv loads the SQL files and the audit tables, starts kfake with the
// topics (8 partitions each) and writes the config cfgFile with the
// database and brokers filled in, plus extra YAML at its end.
func newEnv(t *testing.T, cfgFile string, sqlFiles, topics []string, extra string) *env {
	t.Helper()
	db, k := testenv.Seeded(t, sqlFiles, schema.AuditDDL(""), topics, 8)
	raw, err := os.ReadFile(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &env{t: t, db: db, k: k, runs: filepath.Join(dir, "runs"), parts: 8}
	text := strings.NewReplacer("${OPCTL_MYSQL_DSN}", db.DSN, "${OPCTL_BROKERS:-127.0.0.1:9092}", k.Brokers[0], "${OPCTL_BROKERS}", k.Brokers[0]).Replace(string(raw))
	text += fmt.Sprintf("\nsop:\n  runs_dir: %q\n%s", e.runs, extra)
	e.cfgPath = filepath.Join(dir, "opctl.yaml")
	if err := os.WriteFile(e.cfgPath, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if e.cfg, err = config.Load(e.cfgPath); err != nil {
		t.Fatalf("config: %v", err)
	}
	return e
}

func settlementEnv(t *testing.T) *env {
	return newEnv(t, td("config", "settlement.yaml"),
		[]string{td("schema", "settlement.sql"), td("incidents", "settlement.sql"), td("repair", "settlement_ops.sql")},
		[]string{"settlement-event"}, "")
}

// anchor produces a settlement operation's message at its created_at,
// stores its position in the state row and commits the group past it when
// committed.
func (e *env) anchor(biz string, committed bool) {
	e.t.Helper()
	testenv.AnchorSettlement(e.t, e.db, e.k, e.parts, biz, committed, false)
}

// opctl runs an opctl command line against the env's config and returns
// its exit code, stdout and stderr.
func (e *env) opctl(args ...string) (int, string, string) {
	e.t.Helper()
	ios, _, out, errOut := iostreams.Test()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := cmd.Run(ctx, ios, append([]string{"--config", e.cfgPath}, args...))
	return code, out.String(), errOut.String()
}

// where is the verdict `opctl where` gives.
func (e *env) where(pipeline, biz string) string {
	e.t.Helper()
	_, out, errOut := e.opctl("where", biz, "--pipeline", pipeline, "-o", "json")
	var r struct {
		Verdict struct {
			Code string `json:"code"`
		} `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		e.t.Fatalf("where %s: %v\n%s\n%s", biz, err, out, errOut)
	}
	return r.Verdict.Code
}

func (e *env) count(q string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.db.SQL.QueryRow(q, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// runner is the Runner `opctl sop run` builds, on the env's sources.
func (e *env) runner() *sop.Runner {
	e.t.Helper()
	cl, err := connect.Open(e.cfg, connect.Options{Timeout: 5 * time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cl.Close() })
	svc := cmd.NewRepairService(cl, cl.Triage())
	d := reconcile.Deps{DB: cl.Reader, Collector: cl.Collector}
	return &sop.Runner{Triage: svc.Triage, Service: svc, Config: e.cfg, Records: sop.Records{Dir: e.runs}, Lock: svc.Lock,
		Reconcile: func(ctx context.Context, o reconcile.Options, emit func(reconcile.Result) error) (*reconcile.Summary, error) {
			return reconcile.Run(ctx, d, o, emit)
		}}
}

// events decodes `sop run -o json`: the step objects and the summary.
func events(t *testing.T, out string) ([]sop.Event, sop.Summary) {
	t.Helper()
	var evs []sop.Event
	var sum sop.Summary
	dec := json.NewDecoder(bytes.NewReader([]byte(out)))
	for dec.More() {
		var raw map[string]json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("not JSON objects: %v\n%s", err, out)
		}
		b, _ := json.Marshal(raw)
		if _, ok := raw["run_id"]; ok {
			if err := json.Unmarshal(b, &sum); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for _, k := range []string{"step", "type", "outcome", "verdict", "plan_id", "detail"} {
			if _, ok := raw[k]; !ok {
				t.Fatalf("step object without %q: %s", k, b)
			}
		}
		var ev sop.Event
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	return evs, sum
}
