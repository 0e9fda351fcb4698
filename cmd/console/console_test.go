package console

import (
	"testing"

	"github.com/opctl-dev/opctl/cmd"
	"github.com/opctl-dev/opctl/tui"
)

// The flags' defaults in opctl are the console's own.
func TestDefaults(t *testing.T) {
	if cmd.ConsoleDefaultSince != tui.DefaultSince || cmd.ConsoleDefaultRefresh != tui.DefaultRefresh {
		t.Errorf("opctl tui defaults --since %v --refresh %v, the console %v and %v",
			cmd.ConsoleDefaultSince, cmd.ConsoleDefaultRefresh, tui.DefaultSince, tui.DefaultRefresh)
	}
}

var _ cmd.Console = Run
