package cmd

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
)

// BuildVersion describes the running binary from the build information the
// Go toolchain embeds, read once: the module version ("v1.2.3", a
// pseudo-version, or "(devel)"), when built from a checkout the VCS
// revision, its commit time and whether the tree had uncommitted changes,
// and the Go toolchain (docs/README.md):
//
//	v0.0.0-20261201081500-1a2b3c4d5e6f (rev 1a2b3c4d5e6f, 2026-12-01T08:15:00Z, modified) go1.26.0
func BuildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown: built without module support)"
	}
	if bi.GoVersion == "" {
		return versionOf(bi)
	}
	return versionOf(bi) + " " + bi.GoVersion
}

// versionTemplate is what `opctl --version` prints; `opctl version` prints
// the same line.
const versionTemplate = "opctl {{.Version}}\n"

func versionOf(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return v
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	parts := []string{"rev " + rev}
	if at != "" {
		parts = append(parts, at)
	}
	if modified {
		parts = append(parts, "modified")
	}
	return v + " (" + strings.Join(parts, ", ") + ")"
}

// VersionOptions are what `opctl version` prints and where.
type VersionOptions struct {
	IO      *iostreams.IOStreams
	Version string
}

// NewCmdVersion prints the module version, the VCS revision and the Go
// version: the line of `opctl --version`. runF replaces the run function
// in tests.
func NewCmdVersion(f *Factory, runF func(context.Context, *VersionOptions) error) *cobra.Command {
	opts := &VersionOptions{IO: f.IOStreams, Version: f.Version}
	return &cobra.Command{
		Use:   "version",
		Short: "Print opctl's version (module version and VCS revision)",
		Example: `  opctl version
  opctl --version`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runVersion(opts)
		},
	}
}

// runVersion prints the line of `opctl --version`, in every output format
// (one line is what scripts read).
func runVersion(opts *VersionOptions) error {
	_, err := fmt.Fprintf(opts.IO.Out, "opctl %s\n", opts.Version)
	return err
}
