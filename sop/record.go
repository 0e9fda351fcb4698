package sop

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
)

// A run is recorded as one JSON lines file, RUN_ID.jsonl in the runs
// directory (sop.runs_dir; docs/runbooks.md "Run records"): a header, then
// for each step that ended what a resumed run needs of it — the targets of
// a reconcile step, the plans of a plan step, the plan ids an apply step
// applied — one line each (ids in lines of up to 1000), and last the
// step's event line, which says how many of each came before it. A
// record has no line limit and is read one line at a time, so that a run
// of 30,000 targets records and resumes in memory that grows with one plan
// at a time, not with a line of them all. Each step's lines are written
// and synced before the next step starts, its event line last, so a run
// killed at any point resumes from the first step that did not finish.
// The plans and audit rows of the run carry its id.

// Header is the first line of a run record.
type Header struct {
	RunID   string `json:"run_id"`
	Runbook string `json:"runbook"`
	Source  string `json:"source"`
	// Digest is the sha256 of the runbook's steps: a run resumes only
	// with the runbook it started with.
	Digest    string    `json:"digest"`
	BizID     string    `json:"biz_id,omitempty"`
	Pipeline  string    `json:"pipeline,omitempty"`
	DryRun    bool      `json:"dry_run"`
	Reason    string    `json:"reason"`
	Operator  string    `json:"operator"`
	Action    string    `json:"action,omitempty"`
	Attest    string    `json:"attest,omitempty"`
	Outcome   string    `json:"outcome,omitempty"`
	StartedAt time.Time `json:"started_at"`
}

// Target is one operation a run works on.
type Target struct {
	BizID    string       `json:"biz_id"`
	Pipeline string       `json:"pipeline"`
	Check    string       `json:"check,omitempty"`
	Verdict  inspect.Code `json:"verdict,omitempty"`
	Step     string       `json:"step,omitempty"`
}

// recLine is one line of a run record: the header, one part of a step
// (a target, a plan, applied plan ids), or the event of a step that ended
// with the count of its parts before it. (Records written before parts
// had lines of their own carry Targets, Plans and Applied on the event
// line; they are read as well.)
type recLine struct {
	Header  *Header       `json:"header,omitempty"`
	Event   *Event        `json:"event,omitempty"`
	Target  *Target       `json:"target,omitempty"`
	Plan    *plans.Plan   `json:"plan,omitempty"`
	Applied []string      `json:"applied,omitempty"`
	Parts   *recParts     `json:"parts,omitempty"`
	Targets []Target      `json:"targets,omitempty"`
	Plans   []*plans.Plan `json:"plans,omitempty"`
}

// recParts counts the parts a step's event line closes; Targets and Plans
// are nil when the step did not set them (an empty list is 0).
type recParts struct {
	Targets *int `json:"targets,omitempty"`
	Plans   *int `json:"plans,omitempty"`
	Applied int  `json:"applied,omitempty"`
}

// stepRecord is a step that ended, as a record holds it: its event and
// what it added to the run's state.
type stepRecord struct {
	Event      Event
	Targets    []Target
	Plans      []*plans.Plan
	Applied    []string
	SetTargets bool // the step set the run's targets (to Targets, maybe none)
	SetPlans   bool // the step set the run's plans
}

// appliedPerLine bounds the plan ids of one line.
const appliedPerLine = 1000

// Records is the runs directory.
type Records struct{ Dir string }

// NewRunID is a run id: the UTC start time and 6 random hex digits.
func NewRunID(now time.Time) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return "r" + now.UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b)
}

// ValidRunID reports whether id has the form of a run id (it names a
// file): r, 8 digits, T, 6 digits, a dash and 6 lower case hex digits.
func ValidRunID(id string) bool {
	if len(id) != len("r20060102T150405-abcdef") || id[0] != 'r' || id[9] != 'T' || id[16] != '-' {
		return false
	}
	for i := 1; i < len(id); i++ {
		c := id[i]
		switch {
		case i == 9 || i == 16:
		case i < 16 && c >= '0' && c <= '9':
		case i > 16 && (c >= '0' && c <= '9' || c >= 'a' && c <= 'f'):
		default:
			return false
		}
	}
	return true
}

// DefaultRunsDir is $XDG_STATE_HOME/opctl/runs, else
// ~/.local/state/opctl/runs.
func DefaultRunsDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "opctl", "runs")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "opctl", "runs")
	}
	return filepath.Join(os.TempDir(), "opctl-runs")
}

func (r Records) path(id string) string { return filepath.Join(r.Dir, id+".jsonl") }

// recorder appends the lines of one run.
type recorder struct {
	f *os.File
}

// create starts the record of a new run.
func (r Records) create(h Header) (*recorder, error) {
	if err := os.MkdirAll(r.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("runs directory %s: %w (set sop.runs_dir)", r.Dir, err)
	}
	f, err := os.OpenFile(r.path(h.RunID), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("run record: %w", err)
	}
	rec := &recorder{f: f}
	if err := rec.lines(func(enc *json.Encoder) error { return enc.Encode(recLine{Header: &h}) }); err != nil {
		f.Close()
		return nil, err
	}
	return rec, nil
}

// reopen continues the record of a run being resumed.
func (r Records) reopen(id string) (*recorder, error) {
	f, err := os.OpenFile(r.path(id), os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("run record: %w", err)
	}
	return &recorder{f: f}, nil
}

// step records a step that ended: its parts, synced, then its event line,
// synced.
func (rec *recorder) step(s stepRecord) error {
	parts := &recParts{Applied: len(s.Applied)}
	err := rec.lines(func(enc *json.Encoder) error {
		if s.SetTargets {
			n := len(s.Targets)
			parts.Targets = &n
			for i := range s.Targets {
				if err := enc.Encode(recLine{Target: &s.Targets[i]}); err != nil {
					return err
				}
			}
		}
		if s.SetPlans {
			n := len(s.Plans)
			parts.Plans = &n
			for _, p := range s.Plans {
				if err := enc.Encode(recLine{Plan: p}); err != nil {
					return err
				}
			}
		}
		for ids := s.Applied; len(ids) > 0; {
			k := min(len(ids), appliedPerLine)
			if err := enc.Encode(recLine{Applied: ids[:k]}); err != nil {
				return err
			}
			ids = ids[k:]
		}
		return nil
	})
	if err != nil {
		return err
	}
	return rec.lines(func(enc *json.Encoder) error { return enc.Encode(recLine{Event: &s.Event, Parts: parts}) })
}

// lines writes what write encodes, through a buffer, and syncs it.
func (rec *recorder) lines(write func(*json.Encoder) error) error {
	w := bufio.NewWriterSize(rec.f, 64<<10)
	err := write(json.NewEncoder(w))
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = rec.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("run record %s: %w", rec.f.Name(), err)
	}
	return nil
}

func (rec *recorder) close() error { return rec.f.Close() }

// Record is a run as its record holds it.
type Record struct {
	Header Header
	steps  []stepRecord
}

// Events are the steps that ended, in order (a resumed step appears again).
func (r *Record) Events() []Event {
	out := make([]Event, len(r.steps))
	for i, s := range r.steps {
		out[i] = s.Event
	}
	return out
}

// Load reads the record of run id, one line at a time (no line is too
// long). An unknown id is a *NoRunError.
func (r Records) Load(id string) (*Record, error) {
	if !ValidRunID(id) {
		return nil, &NoRunError{ID: id, Dir: r.Dir, Malformed: true}
	}
	f, err := os.Open(r.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &NoRunError{ID: id, Dir: r.Dir}
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	in := bufio.NewReaderSize(f, 64<<10)
	rec := &Record{}
	var part stepRecord // the parts read since the last event line
	for n := 1; ; n++ {
		b, rerr := in.ReadBytes('\n')
		if rerr != nil && rerr != io.EOF {
			return nil, fmt.Errorf("run record %s: %w", r.path(id), rerr)
		}
		if len(bytes.TrimSpace(b)) == 0 {
			if rerr == io.EOF {
				if n == 1 {
					return nil, fmt.Errorf("run record %s is empty", r.path(id))
				}
				return rec, nil
			}
			continue
		}
		var l recLine
		if err := json.Unmarshal(b, &l); err != nil {
			if n > 1 && (rerr == io.EOF || !hasMore(in)) {
				return rec, nil // the last line of a run killed while writing it: that step did not finish
			}
			return nil, fmt.Errorf("run record %s line %d: %v", r.path(id), n, err)
		}
		if n == 1 {
			if l.Header == nil || l.Header.RunID != id {
				return nil, fmt.Errorf("run record %s: the first line is not the run's header", r.path(id))
			}
			rec.Header = *l.Header
			if rerr == io.EOF {
				return rec, nil
			}
			continue
		}
		switch {
		case l.Target != nil:
			part.Targets = append(part.Targets, *l.Target)
		case l.Plan != nil:
			part.Plans = append(part.Plans, l.Plan)
		case l.Event == nil:
			part.Applied = append(part.Applied, l.Applied...)
		case l.Parts != nil:
			p := l.Parts
			if p.Targets != nil && *p.Targets != len(part.Targets) || p.Plans != nil && *p.Plans != len(part.Plans) || p.Applied != len(part.Applied) {
				return nil, fmt.Errorf("run record %s line %d: step %d (%s) says %s, but its lines before it hold %d targets, %d plans, %d applied: the record was changed, or written by two runs at once",
					r.path(id), n, l.Event.Index, l.Event.Step, partsText(p), len(part.Targets), len(part.Plans), len(part.Applied))
			}
			part.Event, part.SetTargets, part.SetPlans = *l.Event, p.Targets != nil, p.Plans != nil
			rec.steps = append(rec.steps, part)
			part = stepRecord{}
		default: // a record written before parts had lines of their own
			rec.steps = append(rec.steps, stepRecord{Event: *l.Event, Targets: l.Targets, Plans: l.Plans, Applied: l.Applied,
				SetTargets: l.Targets != nil, SetPlans: l.Plans != nil})
		}
		if rerr == io.EOF {
			return rec, nil
		}
	}
}

func partsText(p *recParts) string {
	var s []string
	if p.Targets != nil {
		s = append(s, fmt.Sprintf("%d targets", *p.Targets))
	}
	if p.Plans != nil {
		s = append(s, fmt.Sprintf("%d plans", *p.Plans))
	}
	return strings.Join(append(s, fmt.Sprintf("%d applied", p.Applied)), ", ")
}

// hasMore reports whether in holds anything but blank space.
func hasMore(in *bufio.Reader) bool {
	for {
		c, err := in.ReadByte()
		if err != nil {
			return false
		}
		if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
			return true
		}
	}
}

// NoRunError is a --resume of a run no record holds (exit 2).
type NoRunError struct {
	ID, Dir   string
	Malformed bool
}

// Error says where opctl looked.
func (e *NoRunError) Error() string {
	if e.Malformed {
		return fmt.Sprintf("--resume %q: not a run id (a run id looks like r20260101T120000-1a2b3c, as the run printed)", e.ID)
	}
	return fmt.Sprintf("--resume %s: no record of that run in %s (sop.runs_dir): was it started on another machine?", e.ID, e.Dir)
}

// ExitCode is 2.
func (e *NoRunError) ExitCode() int { return 2 }

// digest is the sha256 of a runbook's name and steps.
func digest(rb *Runbook) string {
	b, _ := json.Marshal(struct {
		Name  string
		Steps []Step
	}{rb.Name, rb.Steps})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
