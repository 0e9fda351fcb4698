// Package render is what opctl shows a person, shared by the commands'
// human output (cmd/ui) and the incident console (tui): the one set of
// Styles and the one renderer of the where report (docs/where.md). It
// depends on inspect and lipgloss only; cmd and tui import it, never the
// other way.
package render

import (
	"charm.land/lipgloss/v2"

	"github.com/opctl-dev/opctl/inspect"
)

// Styles are the styles of everything opctl shows a person, the commands'
// output and the console's screens. Without colour (NO_COLOR, --no-color,
// a pipe) every one is plain: not one escape sequence.
type Styles struct {
	// Text.
	Title, Bold, Dim, Header, Selected, Status, Error lipgloss.Style
	// Severities of a verdict (ok, watch, action).
	OK, Watch, Action lipgloss.Style
	// Step statuses on the console's timeline.
	Applied, Absent, Duplicated, Unknown, Ahead lipgloss.Style
	// Color reports whether the styles are coloured.
	Color bool
}

// NewStyles returns the styles, in colour (256-colour palette indexes,
// which every terminal opctl targets shows) or plain.
func NewStyles(color bool) Styles {
	if !color {
		return Styles{}
	}
	s := lipgloss.NewStyle
	c := lipgloss.Color
	return Styles{
		Title:      s().Bold(true).Foreground(c("6")),
		Bold:       s().Bold(true),
		Dim:        s().Foreground(c("245")),
		Header:     s().Bold(true).Underline(true),
		Selected:   s().Reverse(true),
		Status:     s().Foreground(c("3")),
		Error:      s().Bold(true).Foreground(c("1")),
		OK:         s().Bold(true).Foreground(c("2")),
		Watch:      s().Bold(true).Foreground(c("3")),
		Action:     s().Bold(true).Foreground(c("1")),
		Applied:    s().Foreground(c("2")),
		Absent:     s().Foreground(c("245")),
		Duplicated: s().Bold(true).Foreground(c("1")),
		Unknown:    s().Bold(true).Foreground(c("3")),
		Ahead:      s().Bold(true).Foreground(c("5")),
		Color:      true,
	}
}

// Severity styles text by a verdict's severity: ok, watch, action; any
// other (NOT_FOUND's none) bold.
func (s Styles) Severity(sev inspect.Severity, text string) string {
	switch sev {
	case inspect.SeverityOK:
		return s.OK.Render(text)
	case inspect.SeverityWatch:
		return s.Watch.Render(text)
	case inspect.SeverityAction:
		return s.Action.Render(text)
	}
	return s.Bold.Render(text)
}
