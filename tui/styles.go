package tui

import "github.com/opctl-dev/opctl/tui/render"

// Styles are the console's styles: opctl's one set (tui/render), shared
// with the commands' human output.
type Styles = render.Styles

// NewStyles returns the styles, in colour or plain (NO_COLOR, --no-color).
func NewStyles(color bool) Styles { return render.NewStyles(color) }
