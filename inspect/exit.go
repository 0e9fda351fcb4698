package inspect

import "github.com/opctl-dev/opctl/sources"

// ExitCode is the exit status of `opctl where` for the reports it shows
// (docs/exit-codes.md): partial wins (the verdict may miss something), then
// not found (when no report knows the id), then attention (a verdict of
// severity action), else ok.
func ExitCode(rs []Report) int {
	partial, action, notFound := false, false, true
	for _, r := range rs {
		partial = partial || r.Partial
		action = action || r.Verdict.Severity == SeverityAction
		notFound = notFound && r.Verdict.Code == NotFound
	}
	switch {
	case partial:
		return sources.ExitPartial
	case notFound:
		return sources.ExitNotFound
	case action:
		return sources.ExitAttention
	}
	return sources.ExitOK
}
