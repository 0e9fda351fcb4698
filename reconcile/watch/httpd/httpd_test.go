package httpd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/reconcile/watch"
	"github.com/opctl-dev/opctl/sources/config"
)

type nopSource struct{}

func (nopSource) Name() string                         { return watch.SourcePoll }
func (nopSource) Head(context.Context) (string, error) { return "", nil }
func (nopSource) Changes(_ context.Context, from string) ([]watch.Change, string, error) {
	return nil, from, nil
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestEndpoints serves a watch that flagged one operation in its sweep:
// /metrics names every metric of docs/watch.md and passes `promtool check
// metrics`, /targets lists the flag, /healthz and /readyz answer.
func TestEndpoints(t *testing.T) {
	p := &config.Pipeline{Name: "pay"}
	w := &watch.Watcher{Pipelines: []*config.Pipeline{p}, Source: nopSource{}, Interval: 10 * time.Millisecond,
		Triage: func(_ context.Context, _, id string) (inspect.Report, error) {
			return inspect.Report{BizID: id, Verdict: inspect.Verdict{Code: "STRANDED", Severity: inspect.SeverityAction, Summary: "no one holds it"}}, nil
		},
		Sweep: func(_ context.Context, emit func(reconcile.Result) error) error {
			r := reconcile.Result{Severity: inspect.SeverityAction}
			r.BizID, r.Pipeline, r.Verdict = "b-1", "pay", "STRANDED"
			return emit(r)
		}}
	m := NewMetrics(w.Targets, nil)
	w.Hooks = m.Hooks()
	srv := httptest.NewServer(Handler(w, m))
	defer srv.Close()
	if code, _ := get(t, srv.URL+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before the sweep: %d", code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx) }()
	for i := 0; !w.Ready() && i < 200; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	// A flagged line with a latency, as a poll's would have.
	ms := int64(250)
	m.Hooks().Event(watch.Event{Event: watch.Flagged, LatencyMS: &ms})
	if code, body := get(t, srv.URL+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz after the sweep: %d %s", code, body)
	}
	if code, _ := get(t, srv.URL+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
	_, body := get(t, srv.URL+"/targets")
	var targets []map[string]any
	if err := json.Unmarshal([]byte(body), &targets); err != nil || len(targets) != 1 {
		t.Fatalf("/targets: %v %s", err, body)
	}
	if tg := targets[0]; tg["event"] != "flagged" || tg["biz_id"] != "b-1" || tg["verdict"] != "STRANDED" || tg["pipeline"] != "pay" {
		t.Fatalf("/targets[0] = %v", tg)
	}
	// The recovery worker's: a repair, and the stop it made.
	setRepair := m.RepairState([]string{"standby", "repairing", "paused", "stopped"}, []string{"apply_failed", "unexpected_verdict"})
	m.Repaired("STATE_BEHIND", "repaired")
	// Two binlog looks that found no target: one looked at again, one
	// fenced.
	m.Hooks().SecondLook(watch.SecondLookLooked)
	m.Hooks().SecondLook(watch.SecondLookFenced)
	m.Hooks().SecondLook(watch.SecondLookFenced)
	setRepair("repairing", "")
	setRepair("stopped", "unexpected_verdict")
	code, metrics := get(t, srv.URL+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`opctl_watch_targets{pipeline="pay",verdict="STRANDED"} 1`,
		`opctl_watch_target_oldest_age_seconds{pipeline="pay",verdict="STRANDED"}`,
		`opctl_watch_detection_latency_seconds_bucket{le="0.25"} 1`,
		`opctl_watch_binlog_behind_seconds 0`,
		`opctl_watch_rows_read_total{source="poll"}`,
		`opctl_watch_triages_total{result="ok"} 1`,
		`opctl_watch_binlog_second_looks_total{result="looked"} 1`,
		`opctl_watch_binlog_second_looks_total{result="fenced"} 2`,
		`opctl_watch_up{source="poll"} 1`,
		`opctl_watch_repairs_total{outcome="repaired",verdict="STATE_BEHIND"} 1`,
		`opctl_watch_repair_state{state="stopped"} 1`,
		`opctl_watch_repair_state{state="repairing"} 0`,
		`opctl_watch_repairs_stopped{reason="unexpected_verdict"} 1`,
		`opctl_watch_repairs_stopped{reason="apply_failed"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	// repairs_total is registered whether or not the worker runs.
	ch := make(chan *prometheus.Desc, 1)
	m.repairs.Describe(ch)
	if d := (<-ch).String(); !strings.Contains(d, `"opctl_watch_repairs_total"`) || !strings.Contains(d, "verdict") || !strings.Contains(d, "outcome") {
		t.Errorf("repairs metric: %s", d)
	}
	if strings.Contains(metrics, "go_goroutines") {
		t.Error("/metrics serves the default registry's Go collector: want a registry of its own")
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: apt-get install -y prometheus (.ci/run installs it)")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(metrics)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s\n%s", err, out.String(), metrics)
	}
}
