package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/cmd"
	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/cmd/ui"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/lab"
	"github.com/opctl-dev/opctl/reconcile/watch"
	"github.com/opctl-dev/opctl/reconcile/watch/worker"
	"github.com/opctl-dev/opctl/sources"
)

// Timings of `go run ./lab/demo --watch` (docs/lab.md#the-demo-under-a-watch):
// the lab's operations are seconds old, so the watch polls often and an
// operation is stuck after a few seconds.
const (
	watchInterval  = "250ms"
	watchOlderThan = "3s"
	// watchRepairAfter is --repair-after: the lab's consumers finish an
	// operation in milliseconds (seed 000's PAY-E-1 was mid-way for
	// 36 ms), so a second is ample (docs/watch.md#recovery).
	watchRepairAfter = "1s"
	// watchFlagWait bounds the wait for every incident to be flagged after
	// the scenarios, watchSettleWait the wait for the repairs and clears.
	watchFlagWait   = 30 * time.Second
	watchSettleWait = 90 * time.Second
)

// watchDemo is the state of a demo under a watch: the event lines the
// watch wrote, as they were printed.
type watchDemo struct {
	mu     sync.Mutex
	w      io.Writer
	st     ui.Styles
	events []watch.Event
	buf    []byte
}

// Write takes the watch's event lines (its stdout) and prints each as one
// readable line: time, event, pipeline, id, verdict, cause and latency,
// summary; every value from the lab passes ui.Safe.
func (d *watchDemo) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.buf = append(d.buf, p...)
	for {
		i := bytes.IndexByte(d.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := d.buf[:i]
		d.buf = d.buf[i+1:]
		var e watch.Event
		if err := json.Unmarshal(line, &e); err != nil {
			fmt.Fprintf(d.w, "  (not an event line: %s)\n", ui.Safe(string(line)))
			continue
		}
		d.events = append(d.events, e)
		fmt.Fprintln(d.w, d.format(e))
	}
}

func (d *watchDemo) format(e watch.Event) string {
	kind := fmt.Sprintf("%-13s", e.Event)
	switch e.Event {
	case watch.Flagged, watch.Changed, worker.RepairFailed:
		kind = d.st.Action.Render(kind)
	case watch.Cleared, worker.Repaired:
		kind = d.st.OK.Render(kind)
	default:
		kind = d.st.Watch.Render(kind)
	}
	cause := e.Cause.Source
	if e.LatencyMS != nil {
		cause += fmt.Sprintf(" %dms", *e.LatencyMS)
	}
	verdict := fmt.Sprintf("%-20s", ui.Safe(e.Verdict))
	verdict = d.st.Severity(inspect.Severity(e.Severity), verdict)
	if e.BizID == "" {
		return fmt.Sprintf("%s  %s %s", e.At.Local().Format("15:04:05.000"), kind, ui.Safe(e.Summary))
	}
	return fmt.Sprintf("%s  %s %-20s %-10s %s %-12s %s", e.At.Local().Format("15:04:05.000"), kind, ui.Safe(e.Pipeline),
		ui.Safe(e.BizID), verdict, cause, d.st.Dim.Render(ui.Safe(e.Summary)))
}

// stopped reports whether the recovery worker said it stopped.
func (d *watchDemo) stopped() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.events {
		if e.Event == worker.Paused && strings.HasPrefix(e.Summary, "repairs stopped") {
			return true
		}
	}
	return false
}

// history is what the watch said of each operation, in order.
func (d *watchDemo) history() map[string][]watch.Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string][]watch.Event{}
	for _, e := range d.events {
		if e.BizID != "" {
			out[e.Pipeline+"/"+e.BizID] = append(out[e.Pipeline+"/"+e.BizID], e)
		}
	}
	return out
}

// last is the last event of the operation's history of one of kinds.
func last(h []watch.Event, kinds ...string) *watch.Event {
	for i := len(h) - 1; i >= 0; i-- {
		if slices.Contains(kinds, h[i].Event) {
			return &h[i]
		}
	}
	return nil
}

// runWatchDemo is `go run ./lab/demo --watch`: the lab's incidents under
// a live `opctl watch` (polling, on the lab's server), its recovery worker
// paused by its pause file while the scenarios run; every incident is
// flagged as it happens. Then the pause file is removed and the worker
// repairs what it may (no attestation); then the fixed consumers are
// deployed, and the watch clears each operation when it is healthy (at
// its repair, or when its redriven message was processed). With --no-repair the pause
// file stays; with --keep the lab and the watch stay up until Ctrl-C.
func runWatchDemo(ctx context.Context, ios *iostreams.IOStreams, opts *options) error {
	start := time.Now()
	progress := func(format string, args ...any) { fmt.Fprintf(ios.ErrOut, format, args...) }
	env, err := lab.Start(ctx, lab.Options{MySQLDSN: opts.MySQLDSN, SerialWrites: opts.embedded})
	if err != nil {
		return err
	}
	defer env.Close()
	dir, err := os.MkdirTemp("", "opctl-lab-watch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfgDir := dir
	if opts.Keep {
		cfgDir = "." // the commands printed for another terminal read ./opctl-lab.yaml
		if opts.keepDir != "" {
			cfgDir = opts.keepDir
		}
	}
	cfgPath, err := writeKeptConfig(cfgDir, env)
	if err != nil {
		return fmt.Errorf("write the lab's config: %w", err)
	}
	if opts.Keep {
		defer os.Remove(cfgPath)
	}
	pause := filepath.Join(dir, "repair.pause")
	if err := os.WriteFile(pause, []byte("lab/demo: paused while the scenarios run\n"), 0o600); err != nil {
		return err
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	st := ui.NewStyles(ios.Out, ios.ColorEnabled())
	d := &watchDemo{w: ios.Out, st: st}
	args := []string{"--config", cfgPath, "watch", "--source", "poll", "--listen", addr,
		"--interval", watchInterval, "--older-than", watchOlderThan, "--since", "1d", "--state", "none",
		"--repair", repairable(), "--max-repairs-per-minute", "120", "--repair-after", watchRepairAfter, "--repair-pause-file", pause}
	progress("lab/demo: opctl %s\n", strings.Join(args[2:], " "))
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	done := make(chan int, 1)
	werr := &quietable{w: ios.ErrOut}
	go func() {
		done <- cmd.Run(wctx, &iostreams.IOStreams{In: strings.NewReader(""), Out: d, ErrOut: werr}, args)
	}()
	base := "http://" + addr
	if err := waitReady(ctx, base, done, 60*time.Second); err != nil {
		return err
	}
	fmt.Fprintf(ios.Out, "%s (opctl watch at %s; its recovery worker paused by %s)\n", st.Title.Render("EVENTS"), base, filepath.Base(pause))

	results, err := env.Run(ctx, opts.selected, func(p lab.Progress) {
		if !p.Done {
			progress("[%d/%d] %s\n", p.Index+1, p.Total, p.Scenario)
		} else if p.Err != nil {
			progress("[%d/%d] %s FAILED after %s: %v\n", p.Index+1, p.Total, p.Scenario, p.Elapsed.Round(time.Millisecond), p.Err)
		}
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	var affected []lab.Expectation
	for _, r := range results {
		for _, e := range r.Expect {
			if e.Affected && inspect.SeverityOf(e.Verdict) == inspect.SeverityAction {
				affected = append(affected, e)
			}
		}
	}
	key := func(e lab.Expectation) string { return e.Pipeline + "/" + e.BizID }
	flaggedAll := func() bool {
		h := d.history()
		for _, e := range affected {
			if last(h[key(e)], watch.Flagged) == nil {
				return false
			}
		}
		return true
	}
	waitFor(ctx, watchFlagWait, flaggedAll)

	repairing := !opts.NoRepair && !opts.Keep
	if repairing {
		// The worker repairs with the lab's consumers stopped, as an
		// operator repairs before the fixed consumers are deployed: a
		// consumer resuming a STATE_BEHIND operation from its state row
		// would redo its step first (the verdict's warning).
		progress("lab/demo: every incident is flagged; removing the pause file: the watch's recovery worker repairs\n")
		if err := os.Remove(pause); err != nil {
			return err
		}
		waitFor(ctx, watchSettleWait, func() bool {
			h := d.history()
			for _, e := range affected {
				if last(h[key(e)], worker.Repaired, worker.RepairFailed) == nil && !needsPerson(h[key(e)]) && !d.stopped() {
					return false
				}
			}
			return true
		})
		// Then the fix is deployed, and the redriven messages are
		// processed: the watch clears what waited for them.
		var pipelines []string
		for _, e := range affected {
			pipelines = append(pipelines, e.Pipeline)
		}
		if err := env.DeployFixed(ctx, pipelines); err != nil {
			return err
		}
		progress("lab/demo: the fixed consumers are deployed: the redriven messages are processed\n")
		waitFor(ctx, watchSettleWait, func() bool {
			h := d.history()
			for _, e := range affected {
				ev := last(h[key(e)], watch.Flagged, watch.Changed, watch.Cleared)
				if !needsPerson(h[key(e)]) && (ev == nil || ev.Event != watch.Cleared) {
					return false
				}
			}
			return true
		})
	}
	ok := renderWatchSummary(ios.Out, ios.IsStdoutTTY(), st, d.history(), affected, repairing, time.Since(start))
	next := watchNext(base, affected)
	if opts.Keep {
		fmt.Fprintf(ios.Out, "\n%s (the lab and its watch stay up until Ctrl-C; from another terminal, in this directory)\n", st.Title.Render("NEXT"))
		for _, l := range next {
			fmt.Fprintln(ios.Out, "  "+l)
		}
		<-ctx.Done()
		progress("lab stopped\n")
		return nil
	}
	fmt.Fprintf(ios.Out, "\nTo keep the lab and its watch up and look at them with opctl tui --watch: go run ./lab/demo --watch --keep\n")
	werr.quiet() // the watch's own "stopped" lines: the demo stops it
	stopWatch()
	<-done
	if !ok {
		return errMismatch
	}
	return nil
}

// repairable is --repair's list: every verdict the recovery worker accepts.
func repairable() string {
	var vs []string
	for _, c := range worker.Repairable() {
		vs = append(vs, string(c))
	}
	return strings.Join(vs, ",")
}

// needsPerson reports whether the worker leaves the operation to a person:
// no verdict it was flagged with before a repair is one --repair accepts
// (UNKNOWN_OUTCOME needs an attestation).
func needsPerson(h []watch.Event) bool {
	flagged := false
	for _, e := range h {
		switch e.Event {
		case worker.Repaired, worker.RepairFailed:
			return false
		case watch.Flagged, watch.Changed:
			flagged = true
			if slices.Contains(worker.Repairable(), inspect.Code(e.Verdict)) {
				return false
			}
		}
	}
	return flagged
}

// renderWatchSummary is the table of every incident: its flag (verdict,
// cause, latency), its repair and its clear. It reports whether every
// incident was flagged and, when the worker repaired, every repairable one
// cleared.
func renderWatchSummary(w io.Writer, tty bool, st ui.Styles, hist map[string][]watch.Event, affected []lab.Expectation, repairing bool, elapsed time.Duration) bool {
	fmt.Fprintln(w, "\n"+st.Title.Render("INCIDENTS UNDER THE WATCH"))
	ok := true
	rows := [][]string{}
	for _, e := range affected {
		h := hist[e.Pipeline+"/"+e.BizID]
		flag, rep, clr := last(h, watch.Flagged), last(h, worker.Repaired, worker.RepairFailed), last(h, watch.Cleared)
		row := []string{ui.Safe(e.BizID), ui.Safe(e.Pipeline), string(e.Verdict), "-", "-", "-"}
		if flag == nil {
			ok = false
			row[3] = "NOT FLAGGED"
		} else {
			lat := "sweep"
			if flag.LatencyMS != nil {
				lat = fmt.Sprintf("%s %dms", flag.Cause.Source, *flag.LatencyMS)
			}
			row[3] = ui.Safe(flag.Verdict) + " (" + lat + ")"
		}
		switch {
		case rep != nil && rep.Event == worker.Repaired:
			row[4] = "repaired, then " + ui.Safe(rep.Verdict)
		case rep != nil:
			// The worker stopped here (the events say why); the clear,
			// if the operation healed anyway, is what the table checks.
			row[4] = "REPAIR FAILED, then " + ui.Safe(rep.Verdict)
		case repairing && needsPerson(h):
			row[4] = "left to a person (needs an attestation)"
		case !repairing:
			row[4] = "paused"
		}
		if clr != nil {
			row[5] = "cleared (" + ui.Safe(clr.Verdict) + ")"
		} else if repairing && !needsPerson(h) {
			ok = false
			row[5] = "STILL FLAGGED"
		}
		rows = append(rows, row)
	}
	_ = ui.Table(w, tty, []string{"BIZ_ID", "PIPELINE", "EXPECTED", "FLAGGED", "REPAIR", "CLEARED"}, rows)
	msg := fmt.Sprintf("every incident was flagged by the watch in %s", elapsed.Round(time.Millisecond))
	if repairing {
		msg = fmt.Sprintf("every incident was flagged, and every one the worker may repair repaired and cleared, in %s", elapsed.Round(time.Millisecond))
	}
	if !ok {
		msg = "some incidents were NOT flagged, or not cleared after their repair"
	}
	fmt.Fprintln(w, "\n"+msg)
	return ok
}

// watchNext are the commands a person runs from another terminal on a
// lab kept under its watch (--keep): each runnable as printed from the
// directory the demo runs in (lab/demo's TestWatchDemoNext runs them).
func watchNext(base string, affected []lab.Expectation) []string {
	lines := []string{
		`go build -o opctl . && export PATH="$PWD:$PATH" OPCTL_CONFIG=opctl-lab.yaml`,
		"curl -s " + base + "/targets",
		"curl -s " + base + "/readyz",
		"curl -s " + base + "/metrics | grep '^opctl_watch_'",
		"opctl tui --watch " + base,
	}
	for _, e := range affected {
		if sources.ValidateBizID(e.BizID) == nil {
			lines = append(lines, "opctl where "+e.BizID+" --pipeline "+e.Pipeline)
			break
		}
	}
	return lines
}

// freeAddr is a loopback address with a port free now (the watch binds it).
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitReady waits until the watch at base answers /readyz 200, it ends
// (its status in done), or limit passes.
func waitReady(ctx context.Context, base string, done <-chan int, limit time.Duration) error {
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(limit)
	for {
		select {
		case code := <-done:
			return fmt.Errorf("opctl watch exited with status %d before it was ready (its stderr is above)", code)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if resp, err := c.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errors.New("opctl watch was not ready within " + limit.String() + " (its stderr is above)")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitFor polls f until it holds, ctx ends or limit passes.
func waitFor(ctx context.Context, limit time.Duration, f func() bool) {
	deadline := time.Now().Add(limit)
	for !f() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
}

// quietable passes the watch's stderr through, line by line, until quiet
// is called, without the worker's lines that its events already show on
// stdout (each repair, each pause): one screen, each thing said once.
type quietable struct {
	mu    sync.Mutex
	w     io.Writer
	muted bool
	buf   []byte
}

func (q *quietable) Write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.muted {
		return len(p), nil
	}
	q.buf = append(q.buf, p...)
	for {
		i := bytes.IndexByte(q.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(q.buf[:i+1])
		q.buf = q.buf[i+1:]
		if strings.HasPrefix(line, "watch: repair: ") && !strings.Contains(line, ": repairing [") {
			continue
		}
		if _, err := io.WriteString(q.w, line); err != nil {
			return len(p), err
		}
	}
}

func (q *quietable) quiet() { q.mu.Lock(); q.muted = true; q.mu.Unlock() }
