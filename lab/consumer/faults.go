package consumer

import (
	"sync"
	"time"
)

// Faults are the failures a scenario injects into consumers, per biz id. Each
// fault fires once: the first time its point is reached it is consumed, so a
// consumer restarted with the same Faults (or a second member sharing them)
// runs normally. Faults is safe for concurrent use and may be changed while
// consumers run; the zero value and a nil *Faults inject nothing.
type Faults struct {
	mu              sync.Mutex
	dieAfter        map[stepKey]bool
	dieBeforeCommit map[string]bool
	commitEarly     map[string]bool
	delays          map[stepKey]time.Duration
}

type stepKey struct{ bizID, step string }

// NewFaults returns an empty set of faults.
func NewFaults() *Faults { return &Faults{} }

// DieAfterStep makes the consumer die right after step of bizID has put its
// effect in MySQL: for a naive consumer after the effect and before the
// state update that records it, for an anchored one after the transaction
// that holds both the effect and the state CAS. The consumer commits nothing
// more, emits "died" and shuts down as Kill does.
func (f *Faults) DieAfterStep(bizID, step string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dieAfter == nil {
		f.dieAfter = map[stepKey]bool{}
	}
	f.dieAfter[stepKey{bizID, step}] = true
}

// DieBeforeCommit makes the consumer die after every step of bizID is done
// and before it commits the offset.
func (f *Faults) DieBeforeCommit(bizID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dieBeforeCommit == nil {
		f.dieBeforeCommit = map[string]bool{}
	}
	f.dieBeforeCommit[bizID] = true
}

// CommitEarly makes the consumer commit bizID's offset as soon as the record
// is received, before any step (the auto-commit bug), and then process it.
func (f *Faults) CommitEarly(bizID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.commitEarly == nil {
		f.commitEarly = map[string]bool{}
	}
	f.commitEarly[bizID] = true
}

// StepDelay makes the consumer sleep d before running step of bizID, to
// widen a window. The sleep ends early only when the consumer is stopped or
// killed; a revoked partition does not end it (the work goes on as a zombie).
func (f *Faults) StepDelay(bizID, step string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.delays == nil {
		f.delays = map[stepKey]time.Duration{}
	}
	f.delays[stepKey{bizID, step}] = d
}

// Clear removes every fault of bizID that has not fired yet.
func (f *Faults) Clear(bizID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.dieAfter {
		if k.bizID == bizID {
			delete(f.dieAfter, k)
		}
	}
	for k := range f.delays {
		if k.bizID == bizID {
			delete(f.delays, k)
		}
	}
	delete(f.dieBeforeCommit, bizID)
	delete(f.commitEarly, bizID)
}

// takeDieAfter reports (and consumes) a DieAfterStep fault.
func (f *Faults) takeDieAfter(bizID, step string) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k := stepKey{bizID, step}
	if f.dieAfter[k] {
		delete(f.dieAfter, k)
		return true
	}
	return false
}

// takeDieBeforeCommit reports (and consumes) a DieBeforeCommit fault.
func (f *Faults) takeDieBeforeCommit(bizID string) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dieBeforeCommit[bizID] {
		delete(f.dieBeforeCommit, bizID)
		return true
	}
	return false
}

// takeCommitEarly reports (and consumes) a CommitEarly fault.
func (f *Faults) takeCommitEarly(bizID string) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.commitEarly[bizID] {
		delete(f.commitEarly, bizID)
		return true
	}
	return false
}

// takeDelay returns (and consumes) a StepDelay fault; 0 when none.
func (f *Faults) takeDelay(bizID, step string) time.Duration {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k := stepKey{bizID, step}
	d := f.delays[k]
	delete(f.delays, k)
	return d
}
