package cmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources/config"
)

// NextFlags are the global flags that the commands opctl prints for the
// user to run next carry, so that each reads what the command that
// printed it read (docs/README.md#next-commands): --config and --brokers
// as given, --mysql-dsn when it holds no password. A password is never
// printed; HiddenDSN says a --mysql-dsn was left out for that reason.
type NextFlags struct {
	Flags     string
	HiddenDSN bool
}

// Next returns the flags of g that next commands carry.
func (g GlobalOptions) Next() NextFlags {
	var n NextFlags
	if g.ConfigPath != "" {
		n.Flags += " --config " + inspect.ShellQuote(g.ConfigPath)
	}
	if g.MySQLDSN != "" {
		if config.RedactDSN(g.MySQLDSN) == g.MySQLDSN {
			n.Flags += " --mysql-dsn " + inspect.ShellQuote(g.MySQLDSN)
		} else {
			n.HiddenDSN = true
		}
	}
	if len(g.Brokers) > 0 {
		n.Flags += " --brokers " + inspect.ShellQuote(strings.Join(g.Brokers, ","))
	}
	return n
}

// Apply returns line with the flags after its leading "opctl"
// (inspect.WithFlags).
func (n NextFlags) Apply(line string) string { return inspect.WithFlags(line, n.Flags) }

// Note writes, when a --mysql-dsn was left out of the next commands, a
// line on w saying so.
func (n NextFlags) Note(w io.Writer) {
	if n.HiddenDSN {
		fmt.Fprintln(w, "note: the commands to run next do not repeat --mysql-dsn, whose password is never printed: add it when you run them")
	}
}

// Reports are the reports `opctl where` shows of t (triage.Result.Shown),
// each with its NEXT as the planner makes it (plans.NextLines), every
// opctl line carrying the flags.
func (n NextFlags) Reports(t *triage.Result) []inspect.Report {
	ops := t.Shown()
	out := make([]inspect.Report, len(ops))
	for i, op := range ops {
		r := op.Report
		next := plans.NextLines(plans.Input{Config: t.Config, Report: r, Evidence: &op.Evidence, RedrivePartitions: op.RedrivePartitions})
		r.Verdict.Next = make([]string, len(next))
		for j, l := range next {
			r.Verdict.Next[j] = n.Apply(l)
		}
		out[i] = r
	}
	return out
}
