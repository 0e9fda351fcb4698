// Package sop holds opctl's runbooks: incident procedures as data (YAML,
// docs/runbooks.md), built in with go:embed and extended or overridden by
// the team's files in sop.dir, and the runner that executes them step by
// step. A run goes through the same repair.Service and reconcile code the
// commands use: sop adds no verdict and no plan logic of its own; what it
// adds is that every step can re-triage and stop when the verdict is not
// the one the runbook expects.
package sop

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/config/yamlfile"
)

// StepType is what a step does (docs/runbooks.md "Step types").
type StepType string

// Step types.
const (
	// StepWhere triages the operation(s) as `opctl where` does; expect
	// lists the verdicts the runbook is written for.
	StepWhere StepType = "where"
	// StepProbe triages again, asking the downstream again (the probes
	// of a triage run fresh).
	StepProbe StepType = "probe"
	// StepPlan builds the plan of each operation (repair plan).
	StepPlan StepType = "plan"
	// StepReview shows the plans and waits for a person (--yes passes it).
	StepReview StepType = "review"
	// StepApply applies (or, with --dry-run, dry-runs) the plans not yet
	// applied; count bounds how many (a stage of a mass repair).
	StepApply StepType = "apply"
	// StepVerify triages every operation applied so far again; expect is
	// required.
	StepVerify StepType = "verify"
	// StepWait waits for a duration, or until the verdict is one of until.
	StepWait StepType = "wait"
	// StepNote shows a text and records it.
	StepNote StepType = "note"
	// StepReconcile collects the operations of a mass repair: the targets
	// of `opctl reconcile`.
	StepReconcile StepType = "reconcile"
)

// StepTypes lists the step types in the documented order.
func StepTypes() []StepType {
	return []StepType{StepWhere, StepProbe, StepPlan, StepReview, StepApply, StepVerify, StepWait, StepNote, StepReconcile}
}

// Runbook is one parsed and checked runbook.
type Runbook struct {
	Name  string
	Title string
	// Description is optional text shown by `opctl sop show`.
	Description string
	// Verdicts are the verdicts the runbook is for: `opctl sop run`
	// without a name picks the runbook of the operation's verdict.
	Verdicts []inspect.Code
	Steps    []Step
	// Source is where the runbook was read from: "builtin:NAME.yaml" or
	// a file's path.
	Source string
}

// Mass reports whether the runbook runs on reconcile's targets (it has a
// reconcile step) rather than on one --biz-id.
func (r *Runbook) Mass() bool {
	for _, s := range r.Steps {
		if s.Type == StepReconcile {
			return true
		}
	}
	return false
}

// Step is one step of a runbook. Which fields apply depends on Type
// (docs/runbooks.md).
type Step struct {
	// Name is the step's name (none in the file: "N-type", as "3-apply").
	Name string
	Type StepType
	// Text is a note's text, or what a step tells the person running it.
	Text string
	// Expect are the verdicts a where, probe or verify step accepts.
	Expect []inspect.Code
	// For is how long a wait waits; Until the verdicts it waits for, at
	// most Timeout.
	For     time.Duration
	Until   []inspect.Code
	Timeout time.Duration
	// Count bounds how many plans an apply applies (0: all that are left).
	Count int
	// Checks, Since and OlderThan are a reconcile step's options (as
	// `opctl reconcile --check --since --older-than`).
	Checks    []string
	Since     time.Duration
	OlderThan time.Duration
	// Line is the step's line in its file.
	Line int
}

// Error is one problem of a runbook file, at a line.
type Error struct {
	File string
	Line int
	Msg  string
}

// Error renders "runbook FILE:LINE: message".
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("runbook %s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("runbook %s: %s", e.File, e.Msg)
}

// ErrorList is every problem of one or more runbook files, sorted by file
// and line. A run with an invalid runbook is a usage error (exit 2).
type ErrorList []*Error

// Error is one problem a line.
func (l ErrorList) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// ExitCode is 2: a runbook file is fixed before it runs.
func (l ErrorList) ExitCode() int { return sources.ExitUsage }

// MaxFileSize is the largest runbook file read (256 KiB).
const MaxFileSize = 256 << 10

// maxSteps bounds a runbook's steps.
const maxSteps = 200

// keys of a runbook and of each step type.
var (
	runbookKeys = []string{"name", "title", "description", "verdicts", "steps"}
	commonKeys  = []string{"type", "name", "text"}
)

// typeKeys are the keys a step of type t has besides the common ones.
func typeKeys(t StepType) []string {
	switch t {
	case StepWhere, StepProbe, StepVerify:
		return []string{"expect"}
	case StepWait:
		return []string{"for", "until", "timeout"}
	case StepApply:
		return []string{"count"}
	case StepReconcile:
		return []string{"checks", "since", "older_than"}
	}
	return nil
}

// validName reports whether s is a runbook name: a lower case letter or
// digit, then at most 63 lower case letters, digits, dashes or
// underscores.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case (r == '-' || r == '_') && i > 0:
		default:
			return false
		}
	}
	return true
}

// Parse parses and checks one runbook file; name is the file's name in
// messages. Every problem is reported, each with its line, as an
// ErrorList. No input panics.
func Parse(name string, data []byte) (rb *Runbook, err error) {
	p := &parse{file: name}
	defer func() {
		if r := recover(); r != nil { // the YAML library, on input no test found
			rb, err = nil, ErrorList{{File: name, Msg: fmt.Sprintf("the file could not be parsed (%v)", r)}}
		}
	}()
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	switch {
	case len(data) > MaxFileSize:
		return nil, ErrorList{{File: name, Msg: fmt.Sprintf("the file is %d bytes; a runbook is at most %d", len(data), MaxFileSize)}}
	case len(bytes.TrimSpace(data)) == 0:
		return nil, ErrorList{{File: name, Msg: "the file is empty"}}
	}
	body, perr := yamlfile.Parse(data)
	if perr != nil {
		e := &Error{File: name, Line: perr.Line, Msg: perr.Msg}
		switch perr.Kind {
		case yamlfile.TooDeep, yamlfile.TooWide:
			e.Msg = "the file " + perr.Msg + " here; is this a runbook?"
		case yamlfile.SecondDocument:
			e.Msg = "a second YAML document (---): keep one runbook per file"
		}
		return nil, ErrorList{e}
	}
	if body == nil {
		return nil, ErrorList{{File: name, Msg: "the file holds no runbook (only comments)"}}
	}
	rb = p.runbook(body)
	if len(p.errs) > 0 {
		sort.SliceStable(p.errs, func(i, j int) bool { return p.errs[i].Line < p.errs[j].Line })
		return nil, p.errs
	}
	rb.Source = name
	return rb, nil
}

type parse struct {
	file string
	errs ErrorList
}

func (p *parse) errorf(n *yamlfile.Node, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line(n), Msg: fmt.Sprintf(format, args...)})
}

func line(n *yamlfile.Node) int {
	if n == nil {
		return 0
	}
	return n.Line
}

// field is one key: value of a mapping, with the key's node for its line.
type field struct {
	key string
	kn  *yamlfile.Node
	val *yamlfile.Node
}

// mapping reads a mapping's keys, reporting unknown ones (with a
// suggestion) and repeated ones; allowed are the keys that may appear.
// what names the mapping in messages.
func (p *parse) mapping(n *yamlfile.Node, what string, known []string, allowed func(string) (bool, string)) map[string]*field {
	if n == nil || n.Kind != yamlfile.MappingNode || n.Anchor != "" || yamlfile.Tagged(n) {
		p.errorf(n, "%s must be a mapping of keys (%s), not %s", what, strings.Join(known, ", "), kind(n))
		return nil
	}
	entries, bad := yamlfile.Entries(n)
	for _, kn := range bad {
		p.errorf(kn, "%s: a key must be a plain name", what)
	}
	out := map[string]*field{}
	for _, e := range entries {
		if _, ok := scalar(e.KeyNode); !ok || yamlfile.IsMerge(e.KeyNode) {
			p.errorf(e.KeyNode, "%s: a key must be a plain name", what)
			continue
		}
		k := e.Key
		if first := e.Repeated(); first != nil {
			p.errorf(e.KeyNode, "mapping key %q already defined at [%d:%d]", k, first.Line, first.Column)
			continue
		}
		if ok, why := allowed(k); !ok {
			if why == "" {
				why = fmt.Sprintf("%s: unknown key %q%s", what, k, yamlfile.DidYouMean(k, known))
			}
			p.errorf(e.KeyNode, "%s", why)
			continue
		}
		out[k] = &field{key: k, kn: e.KeyNode, val: e.Value}
	}
	return out
}

func (p *parse) runbook(n *yamlfile.Node) *Runbook {
	rb := &Runbook{}
	fs := p.mapping(n, "the runbook", runbookKeys, func(k string) (bool, string) {
		for _, x := range runbookKeys {
			if x == k {
				return true, ""
			}
		}
		return false, ""
	})
	if fs == nil {
		return rb
	}
	req := func(k string) *field {
		f := fs[k]
		if f == nil {
			p.errorf(n, "missing field %q: a runbook has %s", k, strings.Join([]string{"name", "title", "verdicts", "steps"}, ", "))
		}
		return f
	}
	if f := req("name"); f != nil {
		rb.Name = p.str(f)
		if strings.TrimSpace(rb.Name) == "" {
			p.errorf(f.kn, "name is empty: a runbook is run by its name")
		} else if !validName(rb.Name) {
			p.errorf(f.val, "name %q: want lower case letters, digits and dashes (like %q), at most 64", rb.Name, "duplicate-effect")
		}
	}
	if f := req("title"); f != nil {
		rb.Title = p.str(f)
		if strings.TrimSpace(rb.Title) == "" {
			p.errorf(f.kn, "title is empty: say in a line what the runbook is for")
		}
	}
	if f := fs["description"]; f != nil {
		rb.Description = p.str(f)
	}
	if f := req("verdicts"); f != nil {
		rb.Verdicts = p.verdicts(f)
		if f.val == nil || f.val.Kind == yamlfile.SequenceNode && len(f.val.Content) == 0 {
			p.errorf(f.val, "verdicts: list at least one verdict the runbook is for")
		}
	}
	if f := req("steps"); f != nil {
		seq := f.val
		switch {
		case seq.Kind != yamlfile.SequenceNode || seq.Anchor != "" || yamlfile.Tagged(seq):
			p.errorf(valOr(f), "steps must be a list of steps, not %s", kind(f.val))
		case len(seq.Content) == 0:
			p.errorf(f.val, "steps: the list is empty")
		case len(seq.Content) > maxSteps:
			p.errorf(f.val, "steps: %d steps; a runbook has at most %d", len(seq.Content), maxSteps)
		default:
			for i, sn := range seq.Content {
				rb.Steps = append(rb.Steps, p.step(i+1, sn))
			}
		}
	}
	p.order(rb)
	return rb
}

// order checks what a step needs from the steps before it.
func (p *parse) order(rb *Runbook) {
	planned, reconciled := false, false
	for i, s := range rb.Steps {
		if s.Type == "" {
			continue
		}
		at := &Error{File: p.file, Line: s.Line}
		switch s.Type {
		case StepApply:
			if !planned {
				at.Msg = fmt.Sprintf("step %d (%s): an apply needs a plan step before it", i+1, s.Name)
			}
		case StepReconcile:
			if reconciled {
				at.Msg = fmt.Sprintf("step %d (%s): a runbook has one reconcile step", i+1, s.Name)
			} else if i > 0 {
				for _, b := range rb.Steps[:i] {
					if b.Type != StepNote {
						at.Msg = fmt.Sprintf("step %d (%s): the reconcile step collects the operations the other steps work on: put it first (after notes)", i+1, s.Name)
						break
					}
				}
			}
			reconciled = true
		case StepPlan:
			planned = true
		}
		if at.Msg != "" {
			p.errs = append(p.errs, at)
		}
	}
}

func (p *parse) step(index int, n *yamlfile.Node) Step {
	s := Step{Line: line(n), Name: strconv.Itoa(index)}
	// The type decides which keys apply: read it first.
	var typ StepType
	if n.Kind == yamlfile.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k, _ := scalar(n.Content[i]); k == "type" {
				v, _ := scalar(n.Content[i+1])
				typ = StepType(v)
			}
		}
	}
	known := false
	for _, t := range StepTypes() {
		known = known || t == typ
	}
	all := append(append([]string{}, commonKeys...), "expect", "for", "until", "timeout", "count", "checks", "since", "older_than")
	what := fmt.Sprintf("step %d", index)
	fs := p.mapping(n, what, all, func(k string) (bool, string) {
		for _, x := range commonKeys {
			if x == k {
				return true, ""
			}
		}
		for _, x := range typeKeys(typ) {
			if x == k {
				return true, ""
			}
		}
		for _, x := range all {
			if x == k && known {
				return false, fmt.Sprintf("%s: %q does not apply to a %s step", what, k, typ)
			}
			if x == k {
				return true, "" // the type is wrong: reported once, below
			}
		}
		return false, ""
	})
	if fs == nil {
		return s
	}
	tf := fs["type"]
	switch {
	case tf == nil:
		p.errorf(n, "%s: missing field \"type\" (one of %s)", what, typeNames())
	case !known:
		v := p.str(tf)
		p.errorf(tf.val, "%s: unknown step type %q%s; want one of %s", what, v, yamlfile.DidYouMean(v, typeNames0()), typeNames())
	default:
		s.Type = typ
	}
	if f := fs["name"]; f != nil {
		s.Name = p.str(f)
		what = fmt.Sprintf("step %d (%s)", index, s.Name)
	} else if s.Type != "" {
		s.Name = fmt.Sprintf("%d-%s", index, s.Type)
	}
	if f := fs["text"]; f != nil {
		s.Text = p.str(f)
	}
	if f := fs["expect"]; f != nil {
		s.Expect = p.verdicts(f)
	}
	if f := fs["until"]; f != nil {
		s.Until = p.verdicts(f)
	}
	if f := fs["for"]; f != nil {
		s.For = p.duration(f)
	}
	if f := fs["timeout"]; f != nil {
		s.Timeout = p.duration(f)
	}
	if f := fs["since"]; f != nil {
		s.Since = p.duration(f)
	}
	if f := fs["older_than"]; f != nil {
		s.OlderThan = p.duration(f)
	}
	if f := fs["count"]; f != nil {
		v := p.str(f)
		c, err := strconv.Atoi(v)
		if err != nil || c < 1 || c > 1_000_000 {
			p.errorf(f.val, "%s: count %q: want a whole number of plans ≥ 1 (leave it out for all that are left)", what, v)
		}
		s.Count = c
	}
	if f := fs["checks"]; f != nil {
		for _, c := range p.list(f) {
			if !reconcile.IsCheck(c.v) {
				p.errorf(c.n, "%s: unknown reconcile check %q%s; want %s", what, c.v, yamlfile.DidYouMean(c.v, reconcile.Checks()), strings.Join(reconcile.Checks(), ", "))
				continue
			}
			s.Checks = append(s.Checks, c.v)
		}
	}
	missing := func(k, why string) { p.errorf(n, "%s: missing field %q: %s", what, k, why) }
	switch s.Type {
	case StepNote:
		if strings.TrimSpace(s.Text) == "" {
			missing("text", "a note step shows its text")
		}
	case StepVerify:
		if fs["expect"] == nil {
			missing("expect", "a verify step states the verdicts the repair must leave")
		}
	case StepWait:
		switch {
		case fs["for"] == nil && fs["until"] == nil:
			missing("for", "a wait step waits for a duration (for: 30s) or until verdicts (until: [...] with timeout)")
		case fs["for"] != nil && fs["until"] != nil:
			p.errorf(n, "%s: give for or until, not both", what)
		case fs["until"] != nil && fs["timeout"] == nil:
			missing("timeout", "a wait until verdicts gives up after a timeout")
		}
	}
	return s
}

type item struct {
	v string
	n *yamlfile.Node
}

// list reads a list of scalars (a lone scalar is a list of one).
func (p *parse) list(f *field) []item {
	switch v := f.val; {
	case v.Kind == yamlfile.SequenceNode && v.Anchor == "" && !yamlfile.Tagged(v):
		var out []item
		for _, e := range v.Content {
			s, ok := scalar(e)
			if !ok {
				p.errorf(e, "%s: want a list of plain values, found %s", f.key, kind(e))
				continue
			}
			out = append(out, item{s, e})
		}
		return out
	default:
		s, ok := scalar(f.val)
		if !ok {
			p.errorf(valOr(f), "%s: want a list, found %s", f.key, kind(f.val))
			return nil
		}
		return []item{{s, f.val}}
	}
}

func (p *parse) verdicts(f *field) []inspect.Code {
	var out []inspect.Code
	for _, it := range p.list(f) {
		c := inspect.Code(it.v)
		if !inspect.IsVerdict(c) {
			p.errorf(it.n, "%s: unknown verdict %q%s; see opctl explain", f.key, it.v, yamlfile.DidYouMean(it.v, verdictNames()))
			continue
		}
		out = append(out, c)
	}
	return out
}

func (p *parse) duration(f *field) time.Duration {
	v := p.str(f)
	d, err := config.ParseDuration(v)
	if err != nil || d <= 0 {
		p.errorf(valOr(f), "%s: %q: want a positive duration (30s, 5m, 2h, 7d)", f.key, v)
		return 0
	}
	return d
}

func (p *parse) str(f *field) string {
	s, ok := scalar(f.val)
	if !ok {
		p.errorf(valOr(f), "%s: want a single value, found %s", f.key, kind(f.val))
	}
	return s
}

func valOr(f *field) *yamlfile.Node {
	if f.val != nil && line(f.val) > 0 {
		return f.val
	}
	return f.kn
}

// scalar is a plain value's text; false for a mapping, a list, an alias,
// an anchor or a tag (runbooks use none).
func scalar(n *yamlfile.Node) (string, bool) {
	switch {
	case n == nil:
		return "", true
	case n.Kind != yamlfile.ScalarNode || n.Anchor != "" || yamlfile.Tagged(n):
		return "", false
	case yamlfile.IsNull(n):
		return "", true
	}
	return n.Value, true
}

func kind(n *yamlfile.Node) string {
	switch {
	case n == nil:
		return "nothing"
	case n.Kind == yamlfile.AliasNode || n.Anchor != "":
		return "an anchor or alias (not supported in runbooks)"
	case yamlfile.Tagged(n):
		return "a tagged value (not supported in runbooks)"
	case n.Kind == yamlfile.MappingNode:
		return "a mapping"
	case n.Kind == yamlfile.SequenceNode:
		return "a list"
	}
	return "a value"
}

func typeNames0() []string {
	var out []string
	for _, t := range StepTypes() {
		out = append(out, string(t))
	}
	return out
}

func typeNames() string { return strings.Join(typeNames0(), ", ") }

func verdictNames() []string {
	var out []string
	for _, c := range inspect.Precedence() {
		out = append(out, string(c))
	}
	return out
}

// OrNil is the list as an error, nil when it is empty.
func (l ErrorList) OrNil() error {
	if len(l) == 0 {
		return nil
	}
	return l
}
