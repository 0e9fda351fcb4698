package sop_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/sop"
	"github.com/opctl-dev/opctl/sources"
)

const slowRunbook = `name: slow-look
title: look, wait, look again
verdicts: [SKIPPED_OK]
steps:
  - {name: look, type: where}
  - {name: pause, type: wait, for: 2s}
  - {name: again, type: where}
`

// Two resumes of one run at once (two terminals, two machines): one works
// the run, the other is refused at once (exit 5) naming the holder, and
// runs no step. Before the run's lock both ran every remaining step, and a
// runbook that applies applied its plans twice.
func TestResumeRace(t *testing.T) {
	e := newEnv(t, td("config", "skip.yaml"),
		[]string{td("schema", "skip.sql"), td("incidents", "skip.sql")},
		[]string{"order-event"}, "")
	file := filepath.Join(t.TempDir(), "slow.yaml")
	if err := os.WriteFile(file, []byte(slowRunbook), 0o600); err != nil {
		t.Fatal(err)
	}
	rb, err := sop.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lib, err := sop.Builtins()
	if err != nil {
		t.Fatal(err)
	}
	// A run interrupted in its wait: resumable from "pause".
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	sum, err := e.runner().Start(ctx, rb, sop.Options{BizID: "8822", Pipeline: "orders"})
	if !errors.Is(err, context.Canceled) || sum == nil || sum.Outcome != "interrupted" || sum.Done != 1 {
		t.Fatalf("interrupted run: %v %+v", err, sum)
	}
	for round := range 3 {
		var wg sync.WaitGroup
		type out struct {
			sum *sop.Summary
			err error
			at  time.Duration
		}
		outs := make([]out, 2)
		start := time.Now()
		for i := range outs {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 300 * time.Millisecond)
				s, _, err := e.runner().Resume(context.Background(), lib, sum.RunID, sop.Options{})
				outs[i] = out{s, err, time.Since(start)}
			})
		}
		wg.Wait()
		first, second := outs[0], outs[1]
		if round > 0 {
			// The run had finished: the first says so, the second, still
			// racing, is refused or says so too.
			if first.err != nil || first.sum.Outcome != "done" {
				t.Fatalf("round %d: resume of a finished run: %v %+v", round, first.err, first.sum)
			}
			continue
		}
		if first.err != nil || first.sum.Outcome != "done" {
			t.Fatalf("first resume: %v %+v", first.err, first.sum)
		}
		var held *sources.LockHeldError
		if !errors.As(second.err, &held) || held.ExitCode() != sources.ExitRefused || !strings.Contains(second.err.Error(), "run "+sum.RunID) ||
			!strings.Contains(second.err.Error(), "MySQL connection") {
			t.Fatalf("second resume while the first runs: %v %+v", second.err, second.sum)
		}
		if second.at > time.Second {
			t.Errorf("the second resume was refused after %s: it must not wait for the run", second.at)
		}
	}
	// The record has the interrupted pause once, then pause and again once
	// each: one process worked it.
	rec, err := (sop.Records{Dir: e.runs}).Load(sum.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, ev := range rec.Events() {
		steps = append(steps, ev.Step+":"+ev.Outcome)
	}
	if got := strings.Join(steps, " "); got != "look:ok pause:interrupted pause:ok again:ok" {
		t.Fatalf("run record: %s", got)
	}
}
