package cmd

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// BuildVersion describes the running binary from the build information the
// Go toolchain embeds: the module version ("v1.2.3", a pseudo-version, or
// "(devel)") and, when built from a checkout, the VCS revision, its commit
// time and whether the tree had uncommitted changes:
//
//	v0.0.0-20261201081500-1a2b3c4d5e6f (rev 1a2b3c4d5e6f, 2026-12-01T08:15:00Z, modified)
func BuildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown: built without module support)"
	}
	return versionOf(bi)
}

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

// NewCmdVersion prints the module version and VCS revision.
func NewCmdVersion(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print opctl's version (module version and VCS revision)",
		Example: `  opctl version
  opctl --version`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(f.IOStreams.Out, "opctl %s %s\n", f.Version, goVersion())
			return err
		},
	}
}

// goVersion is the toolchain and platform the binary was built with.
func goVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return bi.GoVersion
}
