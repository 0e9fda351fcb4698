package main

import (
	"context"
	"fmt"
	"os"

	"github.com/opctl-dev/opctl/cmd"
	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/lab"
	"github.com/opctl-dev/opctl/sources"
)

// runConsole opens opctl's incident console on the lab, its incidents
// triaged and not repaired (--tui, docs/lab.md): `opctl tui` itself, on
// the lab's config written to a temporary directory, with --older-than
// 0s (the lab's operations are seconds old) and the incident "lab-demo".
// The lab stops when the console quits.
func runConsole(ctx context.Context, ios *iostreams.IOStreams, env *lab.Env) error {
	dir, err := os.MkdirTemp("", "opctl-lab-tui-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path, err := writeKeptConfig(dir, env)
	if err != nil {
		return fmt.Errorf("write the lab's config: %w", err)
	}
	switch code := cmd.Run(ctx, ios, []string{"tui", "--config", path, "--older-than", "0s", "--incident", "lab-demo"}); code {
	case sources.ExitOK:
		return nil
	case sources.ExitInterrupted:
		return context.Canceled
	default:
		return fmt.Errorf("the console exited with status %d", code)
	}
}
