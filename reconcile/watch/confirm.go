package watch

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// BatchOptions are what BatchTriage's confirm needs from the watch; none
// given, the targets are confirmed by reconcile's default --older-than and
// nothing is said of a confirm that failed.
type BatchOptions struct {
	// OlderThan is --older-than: a report stuck by it (Judge) is a target,
	// confirmed as one of severity action is.
	OlderThan time.Duration
	// Log is told, once until a confirm is read again, that the confirm
	// could not be read and the batch's verdicts stand.
	Log io.Writer
	// NoConfirm turns the confirm off: every report is the batch's.
	NoConfirm bool
}

// confirmer re-reads the targets of a batch triage in one consistent
// snapshot each (docs/watch.md#how-it-works).
type confirmer struct {
	olderThan time.Duration
	log       io.Writer
	off       bool

	mu      sync.Mutex
	failing bool // the last confirm could not be read, and it was said
}

func newConfirmer(opts []BatchOptions) *confirmer {
	c := &confirmer{olderThan: reconcile.DefaultOlderThan}
	for _, o := range opts {
		c.olderThan, c.log, c.off = o.OlderThan, o.Log, o.NoConfirm
	}
	return c
}

// confirm triages again, each in one consistent snapshot
// (sources.Collector.Snapshot), the operations of ids whose batch report
// in reps is a target (Judge: severity action, or stuck by olderThan),
// and puts each confirm's report in its place: the batch's statements
// read an operation's rows tens of milliseconds apart, and may see a
// transaction of a consumer half (the state row before, the effects
// after it commits), which the snapshot never does. The Kafka facts are
// read again with the rows (one group view and one locate for the
// confirm's operations): the verdict is judged from the evidence whole,
// and where the message is looked for depends on the rows read. A confirm
// that cannot be read (pc.DB reads no snapshot: nothing is confirmed; a
// snapshot that fails: the batch's reports stand, said once) never leaves
// a target unflagged, and neither does one whose report is partial where
// the batch's was not: that operation keeps the batch's report.
func (c *confirmer) confirm(ctx context.Context, pc *sources.Collector, p *config.Pipeline, ids []string, reps []inspect.Report) {
	if c.off || ctx.Err() != nil {
		return
	}
	if _, ok := pc.DB.(sources.SnapshotDB); !ok {
		return
	}
	var idx []int
	for i, rep := range reps {
		if c.target(p, rep) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return
	}
	sub := make([]string, len(idx))
	for j, i := range idx {
		sub[j] = ids[i]
	}
	sc := *pc
	sc.Snapshot = true
	confirmed, err := triage.Judge(ctx, &sc, p, sub)
	if err == nil && len(confirmed) != len(sub) {
		err = fmt.Errorf("%d reports for %d operations", len(confirmed), len(sub))
	}
	if err != nil {
		if ctx.Err() == nil {
			c.failed(fmt.Sprintf("%d operation(s) of pipeline %s (%s...): %v", len(sub), p.Name, sub[0], err))
		}
		return
	}
	kept, why := 0, ""
	for j, i := range idx {
		if lost := newlyUnread(confirmed[j], reps[i]); lost != "" {
			if kept++; kept == 1 {
				why = fmt.Sprintf("pipeline %s: %s: read partially (%s)", p.Name, sub[j], lost)
			}
			continue
		}
		reps[i] = confirmed[j]
	}
	if kept > 0 {
		c.failed(fmt.Sprintf("%s, %d operation(s) in all", why, kept))
		return
	}
	c.answered()
}

// target is Judge's decision, at the report's own database clock.
func (c *confirmer) target(p *config.Pipeline, rep inspect.Report) bool {
	now := time.Now()
	if rep.DBNow != nil {
		now = *rep.DBNow
	}
	o, _ := Judge(p, rep, now, c.olderThan)
	return o.Target
}

// newlyUnread names the sources the confirm's report left unread where
// the batch's read them, each with why ("" when none).
func newlyUnread(confirmed, batch inspect.Report) string {
	before := map[string]bool{}
	for _, s := range batch.Unread() {
		before[s] = true
	}
	var out []string
	for _, s := range confirmed.Unread() {
		if !before[s] {
			out = append(out, s+": "+confirmed.Sources[s])
		}
	}
	return strings.Join(out, "; ")
}

// failed says, once until a confirm is read again, that one could not be.
func (c *confirmer) failed(what string) {
	c.mu.Lock()
	say := !c.failing
	c.failing = true
	c.mu.Unlock()
	if say && c.log != nil {
		fmt.Fprintf(c.log, "watch: confirm in one snapshot: %s: the batch's verdicts stand (said once until a confirm is read)\n", what)
	}
}

// answered notes a confirm read whole; the next failure is said again.
func (c *confirmer) answered() {
	c.mu.Lock()
	was := c.failing
	c.failing = false
	c.mu.Unlock()
	if was && c.log != nil {
		fmt.Fprintln(c.log, "watch: confirm in one snapshot: read again")
	}
}
