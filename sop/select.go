package sop

import (
	"fmt"
	"strings"

	"github.com/opctl-dev/opctl/sources"
)

// IsFile reports whether a runbook NAME is a file's path (name.yaml,
// name.yml) rather than the name of a runbook of the library.
func IsFile(name string) bool {
	return strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")
}

// Select is the runbook a NAME means (docs/runbooks.md): a file of its
// own when NAME is a path (checked as opctl sop check does, not yet in
// sop.dir), else the library's runbook of that name; an
// UnknownRunbookError when there is none.
func (l *Library) Select(name string) (*Runbook, error) {
	if IsFile(name) {
		return ReadFile(name)
	}
	if rb, ok := l.Get(name); ok {
		return rb, nil
	}
	return nil, &UnknownRunbookError{Name: name, Known: l.Names()}
}

// UnknownRunbookError is a NAME no runbook has: a usage error (exit 2).
type UnknownRunbookError struct {
	Name  string
	Known []string
}

// Error names the runbooks there are.
func (e *UnknownRunbookError) Error() string {
	return fmt.Sprintf("no runbook %q; known: %s (opctl sop list)", e.Name, strings.Join(e.Known, ", "))
}

// ExitCode is exit 2.
func (e *UnknownRunbookError) ExitCode() int { return sources.ExitUsage }

// Applies reports whether rb has an apply step: a run of it changes
// something, which a person or --yes must accept.
func (rb *Runbook) Applies() bool {
	for _, s := range rb.Steps {
		if s.Type == StepApply {
			return true
		}
	}
	return false
}
