package repair

import (
	"context"
	"errors"
	"fmt"

	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// reads are what an apply reads besides its store, whatever its mode:
// the stale check's collector, the redrive topic's partition count, the
// group's members and the downstreams' probes. None of them writes or
// sends.
type reads struct {
	collector  Collector
	partitions PartitionCounter
	group      GroupReader
	prober     sources.Prober
	// snap, when set, is where group and prober read: everything the
	// actions will ask is read before the first action (readAhead), and
	// answered from there.
	snap *snapshot
}

func (a *Applier) reads() reads {
	return reads{collector: a.Collector, partitions: a.Partitions, group: a.Group, prober: a.Prober}
}

// ahead is r with the group and the probes read ahead (a dry run).
func (r reads) ahead() reads {
	r.snap = &snapshot{prober: r.prober, group: r.group, probes: map[probeCall]sources.ProbeResult{}, groups: map[[2]string]groupAnswer{}}
	if r.prober != nil {
		r.prober = r.snap
	}
	if r.group != nil {
		r.group = r.snap
	}
	return r
}

// probeCall is one GET of a step's probe, as the executor asks it.
type probeCall struct {
	url             string
	applied, absent string // the step's status lists, joined: part of the answer's meaning
}

// groupAnswer is what the group read answered.
type groupAnswer struct {
	view sources.GroupView
	err  error
}

// snapshot answers a dry run's probes and group reads from what was read
// before its one transaction opened (readAhead). A dry run holds that
// transaction, and every lock its guards took, from its first action to
// its end; a call to a downstream between two actions would hold them
// across the call. A question not read ahead is answered as unread (the
// guard that asked it fails, the dry run says why), never by a call made
// under the locks.
type snapshot struct {
	prober sources.Prober
	group  GroupReader
	probes map[probeCall]sources.ProbeResult
	groups map[[2]string]groupAnswer
	// sealed is set once the actions start: nothing is read after it.
	sealed bool
}

// Probe answers from the snapshot; before it is sealed, it reads.
func (s *snapshot) Probe(ctx context.Context, url string, applied, absent []string) sources.ProbeResult {
	k := newProbeCall(url, applied, absent)
	if r, ok := s.probes[k]; ok {
		return r
	}
	if s.sealed {
		return sources.ProbeResult{URL: sources.RedactURL(url), Outcome: sources.ProbeInconclusive, Detail: "dry run: this probe was not read before the dry run's transaction"}
	}
	r := s.prober.Probe(ctx, url, applied, absent)
	s.probes[k] = r
	return r
}

// Group answers from the snapshot; before it is sealed, it reads.
func (s *snapshot) Group(ctx context.Context, topic, group string) (sources.GroupView, error) {
	k := [2]string{topic, group}
	if a, ok := s.groups[k]; ok {
		return a.view, a.err
	}
	if s.sealed {
		return sources.GroupView{}, errors.New("dry run: the group was not read before the dry run's transaction")
	}
	v, err := s.group.Group(ctx, topic, group)
	s.groups[k] = groupAnswer{view: v, err: err}
	return v, err
}

func newProbeCall(url string, applied, absent []string) probeCall {
	return probeCall{url: url, applied: fmt.Sprintf("%q", applied), absent: fmt.Sprintf("%q", absent)}
}

// probeURL is step s's probe URL for the operation (and a request id).
func (x *applyRun) probeURL(s config.Step, requestID string) string {
	return sources.Expand(s.Probe, map[string]string{"biz_id": x.plan.BizID, "request_id": requestID}, true)
}

// readAhead reads, before the first action's transaction, what the
// remaining actions will read outside the database: a binlog step's
// changes (the stale check's read, or one now for a resumed apply) and,
// when the reads are a snapshot (a dry run), every probe and group read
// their guards and effects ask for. An apply reads its probes again just
// before each action's transaction (preRead), outside it.
func (x *applyRun) readAhead(ctx context.Context) error {
	remaining := x.remaining()
	if x.fresh == nil && x.rd.collector != nil && x.needsBinlog(remaining) {
		if ev, err := x.rd.collector.Collect(ctx, x.p, x.plan.BizID); err == nil {
			x.fresh = &ev
		}
	}
	if x.rd.snap == nil {
		return nil
	}
	for _, act := range remaining {
		for _, g := range act.Guards {
			switch g.Check {
			case plans.CheckProbeCount, plans.CheckProbeOutcome:
				if k := x.p.StepIndex(g.Step); k >= 0 && x.p.Steps[k].Probe != "" && x.rd.prober != nil {
					s := x.p.Steps[k]
					x.rd.prober.Probe(ctx, x.probeURL(s, g.Key), s.ProbeApplied, s.ProbeAbsent)
				}
			case plans.CheckOwnerMember:
				if x.rd.group != nil {
					_, _ = x.rd.group.Group(ctx, x.p.Topic, x.p.Group)
				}
			}
		}
		// The effects' own probe reads: a redrive's count after its POST,
		// a compensation's or a redrive's lookup of an earlier send.
		var requestID string
		switch {
		case act.Type == plans.CompensateRemote && act.Compensate != nil:
			requestID = act.Compensate.RequestID
		case act.Type == plans.Redrive && act.Redrive != nil:
			requestID = act.Redrive.RequestID
		default:
			continue
		}
		if k := x.p.StepIndex(act.Step); k >= 0 && x.p.Steps[k].Probe != "" && x.rd.prober != nil {
			s := x.p.Steps[k]
			x.rd.prober.Probe(ctx, x.probeURL(s, requestID), s.ProbeApplied, s.ProbeAbsent)
		}
	}
	x.rd.snap.sealed = true
	return ctx.Err()
}

// remaining are the plan's actions that have not taken effect.
func (x *applyRun) remaining() []plans.Action {
	var out []plans.Action
	for i, act := range x.plan.Actions {
		if x.res.Actions[i].Outcome != OutcomeAlready {
			out = append(out, act)
		}
	}
	return out
}

// needsBinlog is true when a guard of acts reads a binlog step's evidence.
func (x *applyRun) needsBinlog(acts []plans.Action) bool {
	for _, act := range acts {
		steps := []string{act.Step}
		for _, g := range act.Guards {
			steps = append(steps, g.Step)
		}
		for _, st := range steps {
			if k := x.p.StepIndex(st); k >= 0 && x.p.Steps[k].Binlog != nil {
				return true
			}
		}
	}
	return false
}

// preRead reads what the action's guards need from outside the database:
// probe answers and group membership, just before the transaction (never
// inside it: no lock is held across a call to a downstream). The guards
// check what it read; the database rows they guard are re-read under the
// transaction's locks.
func (x *applyRun) preRead(ctx context.Context, act plans.Action) (*preRead, error) {
	pre := &preRead{probeCount: map[string]*int{}, probeOutcome: map[string]string{}, member: map[string]bool{}}
	for _, g := range act.Guards {
		switch g.Check {
		case plans.CheckProbeCount, plans.CheckProbeOutcome:
			k := x.p.StepIndex(g.Step)
			if k < 0 || x.p.Steps[k].Probe == "" {
				return nil, fmt.Errorf("guard %s: step %s has no probe", g, g.Step)
			}
			if x.rd.prober == nil {
				return nil, fmt.Errorf("guard %s: no prober", g)
			}
			s := x.p.Steps[k]
			r := x.rd.prober.Probe(ctx, x.probeURL(s, g.Key), s.ProbeApplied, s.ProbeAbsent)
			if g.Check == plans.CheckProbeCount {
				pre.probeCount[g.Step] = r.Count
			} else {
				pre.probeOutcome[g.Step+"\x00"+g.Key] = r.Outcome
			}
		case plans.CheckOwnerMember:
			if x.rd.group == nil {
				pre.memberErr = errors.New("Kafka is not configured")
				continue
			}
			gv, err := x.rd.group.Group(ctx, x.p.Topic, x.p.Group)
			if err != nil {
				pre.memberErr = err
				continue
			}
			pre.member[g.Key] = plans.IsMember(gv, g.Key)
		}
	}
	return pre, nil
}
