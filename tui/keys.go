package tui

import "charm.land/bubbles/v2/key"

// KeyMap is every key of the console (docs/tui.md); the help overlay is
// built from it, so a key and its help never disagree.
type KeyMap struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
	Filter, Sort, Refresh, Open, GoTo       key.Binding
	Back, Help, Quit                        key.Binding
	Plan, DryRun, Apply, Audit, Attest      key.Binding
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
		Sort:     key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "sort column")),
		Refresh:  key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "refresh now")),
		Open:     key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open detail")),
		GoTo:     key.NewBinding(key.WithKeys(":"), key.WithHelp(":", "go to an id")),
		Back:     key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
		Help:     key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Quit:     key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
		Plan:     key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "plan (diff)")),
		DryRun:   key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "dry run")),
		Apply:    key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "apply…")),
		Audit:    key.NewBinding(key.WithKeys("A"), key.WithHelp("A", "audit")),
		Attest:   key.NewBinding(key.WithKeys("t"), key.WithHelp("t", "attest…")),
	}
}

// helpGroups are the key map's bindings as the help overlay lists them.
func (k KeyMap) helpGroups() []helpGroup {
	return []helpGroup{
		{"list", []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom, k.Filter, k.Sort, k.Refresh, k.Open}},
		{"detail", []key.Binding{k.Plan, k.DryRun, k.Apply, k.Attest, k.Audit, k.Refresh, k.Back}},
		{"anywhere", []key.Binding{k.GoTo, k.Help, k.Quit}},
	}
}

type helpGroup struct {
	title string
	keys  []key.Binding
}
