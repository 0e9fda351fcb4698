package tui

import (
	"io"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/opctl-dev/opctl/inspect"
)

// Styles are the console's styles; without colour every one is plain
// (NO_COLOR, --no-color).
type Styles struct {
	Title, Bold, Dim, Header, Selected, Status, Error lipgloss.Style
	OK, Watch, Action                                 lipgloss.Style
	// Step statuses on the timeline.
	Applied, Absent, Duplicated, Unknown, Ahead lipgloss.Style
	Border                                      lipgloss.Style
}

// NewStyles returns the styles for w, in colour or plain.
func NewStyles(w io.Writer, color bool) Styles {
	r := lipgloss.NewRenderer(w)
	if color {
		r.SetColorProfile(termenv.ANSI256)
	} else {
		r.SetColorProfile(termenv.Ascii)
	}
	c := func(s string) lipgloss.Color { return lipgloss.Color(s) }
	return Styles{
		Title:      r.NewStyle().Bold(true).Foreground(c("6")),
		Bold:       r.NewStyle().Bold(true),
		Dim:        r.NewStyle().Foreground(c("245")),
		Header:     r.NewStyle().Bold(true).Underline(true),
		Selected:   r.NewStyle().Reverse(true),
		Status:     r.NewStyle().Foreground(c("3")),
		Error:      r.NewStyle().Bold(true).Foreground(c("1")),
		OK:         r.NewStyle().Foreground(c("2")),
		Watch:      r.NewStyle().Foreground(c("3")),
		Action:     r.NewStyle().Bold(true).Foreground(c("1")),
		Applied:    r.NewStyle().Foreground(c("2")),
		Absent:     r.NewStyle().Foreground(c("245")),
		Duplicated: r.NewStyle().Bold(true).Foreground(c("1")),
		Unknown:    r.NewStyle().Bold(true).Foreground(c("3")),
		Ahead:      r.NewStyle().Bold(true).Foreground(c("5")),
		Border:     r.NewStyle().Border(lipgloss.NormalBorder()).BorderForeground(c("240")),
	}
}

// Severity styles text by a verdict's severity: ok, watch, action; any
// other (NOT_FOUND's none) plain.
func (s Styles) Severity(sev inspect.Severity, text string) string {
	st, ok := map[inspect.Severity]lipgloss.Style{inspect.SeverityOK: s.OK, inspect.SeverityWatch: s.Watch, inspect.SeverityAction: s.Action}[sev]
	if !ok {
		return text
	}
	return st.Render(text)
}
