package lab_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/cmd"
	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/lab"
	"github.com/opctl-dev/opctl/lab/consumer"
	"github.com/opctl-dev/opctl/lab/testenv"
)

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestWatchFlagsAnInjectedIncident runs `opctl watch` in polling mode over
// the lab, then injects an incident (a consumer that commits on receipt
// and dies after the debit): watch flags it STRANDED from a poll or the
// timer, /targets and /metrics list it, a repair clears it, and SIGINT (the context) stops it
// within a second (docs/watch.md); after the lab repairs it, watch clears
// it.
func TestWatchFlagsAnInjectedIncident(t *testing.T) {
	testenv.MySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, err := lab.Start(ctx, lab.Options{MySQLDSN: testenv.RootDSN(), Timings: consumer.FastTimings()})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	events, state := filepath.Join(dir, "events.jsonl"), filepath.Join(dir, "watch.json")
	stdout, stderr := &lockedBuf{}, &lockedBuf{}
	ios := &iostreams.IOStreams{In: strings.NewReader(""), Out: stdout, ErrOut: stderr}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan int, 1)
	go func() {
		done <- cmd.Run(wctx, ios, []string{"--config", env.ConfigPath, "watch", "--listen", addr, "--events", events,
			"--interval", "200ms", "--older-than", "1s", "--since", "1d", "--state", state})
	}()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	ready := false
	for i := 0; i < 300 && !ready; i++ {
		code, _ := get("/readyz")
		ready = code == http.StatusOK
		if !ready {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !ready {
		t.Fatalf("/readyz never ready; stderr:\n%s", stderr)
	}
	var sc *lab.Scenario
	for _, s := range lab.Scenarios() {
		if s.Name == "stranded-early-commit" {
			sc = &s
		}
	}
	if sc == nil {
		t.Fatal("no scenario stranded-early-commit")
	}
	results, err := env.Run(ctx, []lab.Scenario{*sc}, nil)
	if err != nil || results[0].Err != nil {
		t.Fatalf("scenario: %v %v", err, results[0].Err)
	}
	type line struct {
		Event, Pipeline, Verdict, Severity string
		BizID                              string `json:"biz_id"`
		At                                 string
		Cause                              struct{ Source string }
		LatencyMS                          *int64 `json:"latency_ms"`
	}
	var flagged *line
	deadline := time.Now().Add(30 * time.Second)
	for flagged == nil && time.Now().Before(deadline) {
		b, _ := os.ReadFile(events)
		s := bufio.NewScanner(bytes.NewReader(b))
		for s.Scan() {
			var l line
			if err := json.Unmarshal(s.Bytes(), &l); err != nil {
				t.Fatalf("event line %q: %v", s.Text(), err)
			}
			if l.Event == "flagged" && l.BizID == "PAY-E-1" {
				flagged = &l
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if flagged == nil {
		b, _ := os.ReadFile(events)
		t.Fatalf("PAY-E-1 never flagged; events:\n%s\nstderr:\n%s", b, stderr)
	}
	t.Logf("flagged: %+v", *flagged)
	if flagged.LatencyMS != nil {
		t.Logf("detection latency %d ms", *flagged.LatencyMS)
	}
	if flagged.Verdict != "STRANDED" || flagged.Severity != "action" || (flagged.Cause.Source != "poll" && flagged.Cause.Source != "timer") || flagged.LatencyMS == nil {
		t.Errorf("flagged line %+v: want STRANDED, action, from a poll or the timer, with a latency", *flagged)
	}
	if _, err := time.Parse(time.RFC3339, flagged.At); err != nil || !strings.Contains(flagged.At, ".") {
		t.Errorf("at %q: want RFC 3339 with milliseconds", flagged.At)
	}
	_, body := get("/targets")
	if !strings.Contains(body, `"biz_id":"PAY-E-1"`) || !strings.Contains(body, `"verdict":"STRANDED"`) {
		t.Errorf("/targets: %s", body)
	}
	_, metrics := get("/metrics")
	// Every flagged line with a latency is one observation of the
	// histogram (the metrics are counted before the line is written).
	b, _ := os.ReadFile(events)
	withLatency := 0
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		t.Logf("event: %s", l)
		if strings.Contains(l, `"event":"flagged"`) && !strings.Contains(l, `"latency_ms":null`) {
			withLatency++
		}
	}
	if !strings.Contains(metrics, `opctl_watch_targets{pipeline="`+flagged.Pipeline+`",verdict="STRANDED"} 1`) ||
		!strings.Contains(metrics, `opctl_watch_up{source="poll"} 1`) || strings.Contains(metrics, `opctl_watch_rows_read_total{source="poll"} 0`) ||
		!strings.Contains(metrics, fmt.Sprintf("opctl_watch_detection_latency_seconds_count %d\n", withLatency)) {
		t.Errorf("/metrics:\n%s", metrics)
	}
	// A second watch started once the row is older than --older-than (so
	// out of the poller's look-back too), with no state, finds it in its
	// first sweep (reconcile's stuck check) and flags it with cause
	// "sweep".
	time.Sleep(1500 * time.Millisecond)
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr2 := l2.Addr().String()
	l2.Close()
	events2 := filepath.Join(dir, "events2.jsonl")
	swctx, swstop := context.WithCancel(ctx)
	swdone := make(chan int, 1)
	swerr := &lockedBuf{}
	go func() {
		swdone <- cmd.Run(swctx, &iostreams.IOStreams{In: strings.NewReader(""), Out: &lockedBuf{}, ErrOut: swerr},
			[]string{"--config", env.ConfigPath, "watch", "--listen", addr2, "--events", events2, "--older-than", "1s", "--since", "1d", "--state", "none"})
	}()
	var swept string
	for i := 0; i < 300 && swept == ""; i++ {
		b, _ := os.ReadFile(events2)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, `"biz_id":"PAY-E-1"`) {
				swept = l
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	swstop()
	<-swdone
	if !strings.Contains(swept, `"event":"flagged"`) || !strings.Contains(swept, `"source":"sweep"`) || !strings.Contains(swept, `"verdict":"STRANDED"`) {
		t.Errorf("the sweep of a second watch: %q; stderr:\n%s", swept, swerr)
	}
	// Repair it (plan + apply, then the fixed consumer redrives it): the
	// poll sees the state row move and watch clears the flag.
	checks, err := env.Check(ctx, results)
	if err != nil {
		t.Fatal(err)
	}
	repairs, err := env.Repair(ctx, checks, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range repairs {
		if r.BizID == "PAY-E-1" && !r.OK {
			t.Fatalf("repair of PAY-E-1: %s → %s (%s %s)", r.Before, r.After, r.Applied, r.Why)
		}
	}
	var cleared *line
	deadline = time.Now().Add(30 * time.Second)
	for cleared == nil && time.Now().Before(deadline) {
		b, _ := os.ReadFile(events)
		s := bufio.NewScanner(bytes.NewReader(b))
		for s.Scan() {
			var l line
			if err := json.Unmarshal(s.Bytes(), &l); err == nil && l.Event == "cleared" && l.BizID == "PAY-E-1" {
				cleared = &l
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if cleared == nil {
		b, _ := os.ReadFile(events)
		t.Fatalf("PAY-E-1 never cleared after its repair; events:\n%s\nstderr:\n%s", b, stderr)
	}
	t.Logf("cleared: %+v", *cleared)
	// A poll sees the state row move; the settle look DefaultSettle after
	// the flag may see it first (docs/watch.md#how-it-works).
	if cleared.Severity == "action" || (cleared.Cause.Source != "poll" && cleared.Cause.Source != "timer") {
		t.Errorf("cleared line %+v: want a healthy verdict seen by a poll or the settle look", *cleared)
	}
	if _, body := get("/targets"); strings.Contains(body, "PAY-E-1") {
		t.Errorf("/targets after the clear: %s", body)
	}
	if _, metrics := get("/metrics"); strings.Contains(metrics, `opctl_watch_targets{pipeline="`+flagged.Pipeline+`",verdict="STRANDED"}`) {
		t.Errorf("/metrics still counts the cleared target")
	}
	if stdout.String() != "" {
		t.Errorf("stdout with --events: %q", stdout)
	}
	stopped := time.Now()
	stop()
	select {
	case code := <-done:
		if code != 130 {
			t.Errorf("watch exit %d; stderr:\n%s", code, stderr)
		}
		t.Logf("stopped in %s; stderr:\n%s", time.Since(stopped), stderr)
	case <-time.After(time.Second):
		t.Fatalf("watch did not stop within 1s; stderr:\n%s", stderr)
	}
	// A restart resumes from the saved position, without a sweep.
	b, err = os.ReadFile(state)
	if err != nil || !strings.Contains(string(b), `"position":"{`) {
		t.Fatalf("state file after the stop: %s %v", b, err)
	}
	stderr2 := &lockedBuf{}
	ios2 := &iostreams.IOStreams{In: strings.NewReader(""), Out: &lockedBuf{}, ErrOut: stderr2}
	wctx2, stop2 := context.WithCancel(ctx)
	defer stop2()
	go func() {
		done <- cmd.Run(wctx2, ios2, []string{"--config", env.ConfigPath, "watch", "--listen", addr, "--events", events,
			"--interval", "200ms", "--older-than", "1s", "--since", "1d", "--state", state})
	}()
	ready = false
	for i := 0; i < 300 && !ready; i++ {
		code, _ := get("/readyz")
		ready = code == http.StatusOK
		if !ready {
			time.Sleep(50 * time.Millisecond)
		}
	}
	stop2()
	<-done
	if !ready || !strings.Contains(stderr2.String(), "resumed from the saved position") || strings.Contains(stderr2.String(), "first sweep done") {
		t.Errorf("restart: ready %v; stderr:\n%s", ready, stderr2)
	}
}
