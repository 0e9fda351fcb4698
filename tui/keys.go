package tui

import "charm.land/bubbles/v2/key"

// KeyMap is every key of the console (docs/tui.md). The help screen and
// the key hints at the foot of each screen are bubbles/help views of it,
// so a key and its help never disagree.
type KeyMap struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
	Filter, Sort, Refresh, Open, GoTo       key.Binding
	Back, Help, Quit                        key.Binding
	Plan, DryRun, Apply, Audit, Attest      key.Binding
	// Reread is Refresh on the detail: the operation triaged again.
	Reread key.Binding
}

// DefaultKeyMap is the console's key map.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Up:       key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:     key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		PageUp:   key.NewBinding(key.WithKeys("pgup", "ctrl+b"), key.WithHelp("pgup", "page up")),
		PageDown: key.NewBinding(key.WithKeys("pgdown", "ctrl+f", "space"), key.WithHelp("pgdn", "page down")),
		Top:      key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("g", "top")),
		Bottom:   key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("G", "bottom")),
		Filter:   key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		Sort:     key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "sort")),
		Refresh:  key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "refresh")),
		Reread:   key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "re-read")),
		Open:     key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open")),
		GoTo:     key.NewBinding(key.WithKeys(":"), key.WithHelp(":", "go to id")),
		Back:     key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
		Help:     key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Quit:     key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
		Plan:     key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "plan")),
		DryRun:   key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "dry run")),
		Apply:    key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "apply")),
		Audit:    key.NewBinding(key.WithKeys("A"), key.WithHelp("A", "audit")),
		Attest:   key.NewBinding(key.WithKeys("t"), key.WithHelp("t", "attest")),
	}
}

// ShortHelp is the list's key hints (help.KeyMap).
func (k KeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Open, k.Filter, k.Sort, k.Refresh, k.GoTo, k.Help, k.Quit}
}

// detailHelp is the detail's key hints; without apply under --readonly
// (a still answers, saying why it is disabled).
func (k KeyMap) detailHelp(readOnly bool) []key.Binding {
	if readOnly {
		return []key.Binding{k.Plan, k.DryRun, k.Attest, k.Audit, k.Reread, k.Back, k.Help}
	}
	return []key.Binding{k.Plan, k.DryRun, k.Apply, k.Attest, k.Audit, k.Reread, k.Back, k.Help}
}

// FullHelp is every key, by screen: the list, the detail, anywhere
// (help.KeyMap).
func (k KeyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom, k.Filter, k.Sort, k.Refresh, k.Open},
		{k.Plan, k.DryRun, k.Apply, k.Attest, k.Audit, k.Reread, k.Back},
		{k.GoTo, k.Help, k.Quit},
	}
}
