// Command opctl-tui is opctl with the incident console in the process:
// `opctl tui` runs it (docs/tui.md#the-opctl-tui-binary).
package main

import (
	"os"

	"github.com/opctl-dev/opctl/cmd"
	"github.com/opctl-dev/opctl/cmd/console"
)

func main() { os.Exit(cmd.MainConsole(console.Run)) }
