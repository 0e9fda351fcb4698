package sop

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources/config/yamlfile"
)

// Every built-in parses, is named after the verdicts it is for, and there
// is one for each verdict whose severity is action.
func TestBuiltins(t *testing.T) {
	lib, err := Builtins()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range inspect.Precedence() {
		if inspect.SeverityOf(c) != inspect.SeverityAction {
			continue
		}
		rb, ok := lib.For(c)
		if !ok || rb.Name != RunbookName(c) || !strings.HasPrefix(rb.Source, BuiltinPrefix) {
			t.Errorf("%s: runbook %+v, want the built-in %s", c, rb, RunbookName(c))
		}
	}
	m, ok := lib.Get("mass-redelivery")
	if !ok || !m.Mass() {
		t.Fatalf("mass-redelivery: %+v", m)
	}
	var stages []int
	for _, s := range m.Steps {
		if s.Type == StepApply {
			stages = append(stages, s.Count)
		}
	}
	if len(stages) != 3 || stages[0] != 1 || stages[1] != 10 || stages[2] != 0 {
		t.Fatalf("mass-redelivery applies in stages %v, want 1, 10, the rest", stages)
	}
	if _, ok := lib.For(inspect.Complete); ok {
		t.Fatal("a runbook for COMPLETE")
	}
}

func TestParseErrors(t *testing.T) {
	head := "name: x\ntitle: t\nverdicts: [STRANDED]\nsteps:\n"
	for _, c := range []struct {
		name, text string
		want       []string // each "LINE: substring"
	}{
		{"unknown step type", head + "  - type: where\n  - type: aply\n",
			[]string{`6: step 2: unknown step type "aply" (did you mean "apply"?)`}},
		{"unknown verdict", "name: x\ntitle: t\nverdicts: [STRANDID]\nsteps:\n  - type: verify\n    expect: [COMPLET, COMPLETE]\n",
			[]string{`3: verdicts: unknown verdict "STRANDID" (did you mean "STRANDED"?)`, `6: expect: unknown verdict "COMPLET" (did you mean "COMPLETE"?)`}},
		{"missing fields", "title: t\nsteps:\n  - type: verify\n  - type: note\n  - type: wait\n    until: [COMPLETE]\n  - name: x\n",
			[]string{`1: missing field "name"`, `1: missing field "verdicts"`, `3: step 1: missing field "expect"`, `4: step 2: missing field "text"`, `5: step 3: missing field "timeout"`, `7: step 4: missing field "type"`}},
		{"unknown key", head + "  - type: where\n    expext: [STRANDED]\n", []string{`6: step 1: unknown key "expext" (did you mean "expect"?)`}},
		{"key of another type", head + "  - type: note\n    text: hi\n    count: 3\n", []string{`7: step 1: "count" does not apply to a note step`}},
		{"top-level key", head + "  - type: where\nverdict: [X]\n", []string{`6: the runbook: unknown key "verdict" (did you mean "verdicts"?)`}},
		{"apply before plan", head + "  - type: apply\n  - type: plan\n", []string{`5: step 1 (1-apply): an apply needs a plan step before it`}},
		{"bad values", head + "  - type: wait\n    for: soon\n  - type: plan\n  - type: apply\n    count: -1\n  - type: reconcile\n    checks: [stuk]\n",
			[]string{`6: for: "soon": want a positive duration`, `9: step 3: count "-1"`, `11: step 4: unknown reconcile check "stuk" (did you mean "stuck"?)`, `10: step 4 (4-reconcile): the reconcile step collects`}},
		{"bad name", "name: Bad Name\ntitle: t\nverdicts: [STRANDED]\nsteps: [{type: where}]\n", []string{`1: name "Bad Name": want lower case`}},
		{"repeated key", head + "  - type: where\n    type: plan\n", []string{`6: mapping key "type" already defined at [5:5]`}},
		{"not a mapping", "- a\n- b\n", []string{`1: the runbook must be a mapping`}},
		{"empty steps", "name: x\ntitle: t\nverdicts: [STRANDED]\nsteps: []\n", []string{`4: steps: the list is empty`}},
		{"alias", "name: &n x\ntitle: *n\nverdicts: [STRANDED]\nsteps: [{type: where}]\n", []string{`: title: want a single value, found an anchor or alias`}},
		{"syntax", "name: [x\n", []string{"runbook f.yaml:"}},
		{"empty", "", []string{"runbook f.yaml: the file is empty"}},
		{"deep", strings.Repeat("[", 100) + strings.Repeat("]", 100), []string{"nests deeper than 64 levels"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(c.text))
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error %v, want an ErrorList", err)
			}
			msg := err.Error()
			for _, w := range c.want {
				if !strings.Contains(msg, "runbook f.yaml:"+w) && !strings.Contains(msg, w) {
					t.Errorf("errors:\n%s\nwant %q", msg, w)
				}
			}
			if n := strings.Count(msg, "\n") + 1; n < len(c.want) {
				t.Errorf("%d errors, want every one of %d:\n%s", n, len(c.want), msg)
			}
		})
	}
}

// The team's runbooks add to and override the built-ins; their errors are
// every file's, each with its line.
func TestLoadTeamDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("stranded.yaml", "name: stranded\ntitle: ours\nverdicts: [STRANDED]\nsteps:\n  - type: where\n    expect: [STRANDED]\n  - type: note\n    text: page the payments on-call\n")
	write("extra.yml", "name: drain\ntitle: drain a partition\nverdicts: [WILL_REDELIVER]\nsteps: [{type: where}]\n")
	write("README.md", "not a runbook")
	lib, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := lib.Get("stranded")
	if rb.Title != "ours" || rb.Source != filepath.Join(dir, "stranded.yaml") {
		t.Fatalf("stranded is %+v, want the team's", rb)
	}
	if _, ok := lib.Get("drain"); !ok || len(lib.Runbooks) != 10 {
		t.Fatalf("runbooks %v", lib.Names())
	}
	write("bad1.yaml", "name: bad\ntitle: t\nverdicts: [NOPE]\nsteps: [{type: where}]\n")
	write("bad2.yaml", "name: bad2\ntitle: t\nverdicts: [STRANDED]\nsteps:\n  - type: jump\n")
	_, err = Load(dir)
	msg := err.Error()
	for _, w := range []string{"bad1.yaml:3: verdicts: unknown verdict \"NOPE\"", "bad2.yaml:5: step 1: unknown step type \"jump\""} {
		if !strings.Contains(msg, w) {
			t.Errorf("errors:\n%s\nwant %q", msg, w)
		}
	}
}

// FuzzParse: no runbook file panics the parser or yields a runbook that
// breaks the invariants a run relies on.
func FuzzParse(f *testing.F) {
	ents, _ := builtin.ReadDir("runbooks")
	for _, e := range ents {
		b, _ := builtin.ReadFile("runbooks/" + e.Name())
		f.Add(b)
	}
	f.Add([]byte("name: x\ntitle: t\nverdicts: [STRANDED]\nsteps:\n  - type: wait\n    until: [COMPLETE]\n    timeout: 1m\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rb, err := Parse("f.yaml", data)
		if _, perr := yamlfile.Parse(data); perr != nil && err == nil {
			t.Fatalf("parsed a file the YAML layer refuses: %v", perr)
		}
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %v (%T), want a non-empty ErrorList", err, err)
			}
			return
		}
		if rb.Name == "" || rb.Title == "" || len(rb.Verdicts) == 0 || len(rb.Steps) == 0 {
			t.Fatalf("a runbook without its fields: %+v", rb)
		}
		planned := false
		for _, s := range rb.Steps {
			switch s.Type {
			case StepPlan:
				planned = true
			case StepApply:
				if !planned {
					t.Fatalf("apply before plan: %+v", rb)
				}
			case StepVerify:
				if len(s.Expect) == 0 {
					t.Fatalf("verify without expect: %+v", s)
				}
			case StepWait:
				if s.For <= 0 && (len(s.Until) == 0 || s.Timeout <= 0) {
					t.Fatalf("a wait that waits for nothing: %+v", s)
				}
			case StepWhere, StepProbe, StepReview, StepNote, StepReconcile:
			default:
				t.Fatalf("step type %q", s.Type)
			}
		}
	})
}
