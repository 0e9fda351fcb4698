package sop

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
)

// A run is recorded as one JSON lines file, RUN_ID.jsonl in the runs
// directory (sop.runs_dir; docs/runbooks.md "Run records"): a header, then
// one line per step that ended, with what a resumed run needs of it (the
// targets of a reconcile step, the plans of a plan step, the plan ids an
// apply step applied). Each line is written and synced before the next
// step starts, so a run killed at any point resumes from the first step
// that did not finish. The plans and audit rows of the run carry its id.

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

// line is one line of a run record: the header, or a step that ended.
type recLine struct {
	Header  *Header       `json:"header,omitempty"`
	Event   *Event        `json:"event,omitempty"`
	Targets []Target      `json:"targets,omitempty"`
	Plans   []*plans.Plan `json:"plans,omitempty"`
	Applied []string      `json:"applied,omitempty"`
}

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
	if err := rec.write(recLine{Header: &h}); err != nil {
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

func (rec *recorder) write(l recLine) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if _, err := rec.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("run record %s: %w", rec.f.Name(), err)
	}
	if err := rec.f.Sync(); err != nil {
		return fmt.Errorf("run record %s: %w", rec.f.Name(), err)
	}
	return nil
}

func (rec *recorder) close() error { return rec.f.Close() }

// Record is a run as its record holds it.
type Record struct {
	Header Header
	lines  []recLine
}

// Events are the steps that ended, in order (a resumed step appears again).
func (r *Record) Events() []Event {
	var out []Event
	for _, l := range r.lines {
		if l.Event != nil {
			out = append(out, *l.Event)
		}
	}
	return out
}

// maxRecordLine bounds a line of a run record (its plans).
const maxRecordLine = 64 << 20

// Load reads the record of run id. An unknown id is a *NoRunError.
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
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxRecordLine)
	rec := &Record{}
	n := 0
	for sc.Scan() {
		n++
		var l recLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			if n > 1 && !hasMore(sc) {
				break // the last line of a run killed while writing it: that step did not finish
			}
			return nil, fmt.Errorf("run record %s line %d: %v", r.path(id), n, err)
		}
		if n == 1 {
			if l.Header == nil || l.Header.RunID != id {
				return nil, fmt.Errorf("run record %s: the first line is not the run's header", r.path(id))
			}
			rec.Header = *l.Header
			continue
		}
		rec.lines = append(rec.lines, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("run record %s: %w", r.path(id), err)
	}
	if n == 0 {
		return nil, fmt.Errorf("run record %s is empty", r.path(id))
	}
	return rec, nil
}

func hasMore(sc *bufio.Scanner) bool { return sc.Scan() }

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
