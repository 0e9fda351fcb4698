package tui

import (
	"strings"

	"charm.land/bubbles/v2/key"
)

func (m Model) helpView() []string {
	h := m.help
	h.SetWidth(m.width - 2)
	// Each column of bubbles/help's full view headed by its screen (a
	// binding no key matches).
	var groups [][]key.Binding
	for i, g := range m.keys.FullHelp() {
		title := key.NewBinding(key.WithKeys(""), key.WithHelp([]string{"LIST", "DETAIL", "ANYWHERE"}[i], ""))
		groups = append(groups, append([]key.Binding{title}, g...))
	}
	lines := []string{m.st.Title.Render("opctl tui — keys (any key closes this)"), ""}
	for _, l := range strings.Split(h.FullHelpView(groups), "\n") {
		lines = append(lines, "  "+l)
	}
	return append(lines, "", m.st.Dim.Render("apply is disabled by --readonly, a live lease, or a plan that needs an attestation (docs/tui.md)"))
}
