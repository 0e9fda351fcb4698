package cmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"

	"github.com/opctl-dev/opctl/sources/config"
)

// InitOptions are the parsed flags of `opctl init`.
type InitOptions struct {
	IO     *iostreams.IOStreams
	Preset string
	Out    string
	Force  bool
}

// NewCmdInit builds `opctl init`.
func NewCmdInit(f *Factory, runF func(context.Context, *InitOptions) error) *cobra.Command {
	opts := &InitOptions{IO: f.IOStreams}
	c := &cobra.Command{
		Use:   "init --preset NAME",
		Short: "Write an opctl.yaml for one of the seed pipelines",
		Long: `Write a starting opctl.yaml: one pipeline of a seed incident.

  settlement, fulfilment, skip   on the tables 'opctl schema print' recommends
  seed000, seed001, seed003      on the seed's own tables, unmodified
                                 (testdata/schema/seed000.sql, ...)

Edit the topic, group, URLs and your own tables (lines marked # yours), then
compare the database with 'opctl schema check'.`,
		Example: `  opctl init --preset settlement
  opctl init --preset seed003      # idempotent(msg_id, action ENUM), no biz_id
  opctl init --preset skip --out /etc/opctl/config.yaml
  opctl init --preset fulfilment --force      # overwrite ./opctl.yaml`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Preset == "" {
				return usageErrorf("--preset is required: one of %s", strings.Join(config.PresetNames(), ", "))
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runInit(opts)
		},
	}
	c.Flags().StringVar(&opts.Preset, "preset", "", strings.Join(config.PresetNames(), " | "))
	c.Flags().StringVar(&opts.Out, "out", config.LocalFile, "where to write the config")
	c.Flags().BoolVar(&opts.Force, "force", false, "overwrite an existing file")
	_ = c.RegisterFlagCompletionFunc("preset", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return config.PresetNames(), cobra.ShellCompDirectiveNoFileComp
	})
	return c
}

func runInit(opts *InitOptions) error {
	b, err := config.Preset(opts.Preset)
	if err != nil {
		return &UsageError{Err: err}
	}
	// Written through a temporary file (files.go): --force replaces the
	// old file only with a complete one; without it, never an existing one.
	fh, err := createAtomic(opts.Out, modePrivate, !opts.Force)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists; nothing written (pass --force to overwrite it, or --out another file)", opts.Out)
	}
	if err != nil {
		return fmt.Errorf("write %s: %v", opts.Out, err)
	}
	defer fh.Abort()
	if _, err := fh.Write(b); err != nil {
		return fmt.Errorf("write %s: %v", opts.Out, err)
	}
	err = fh.Commit()
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s appeared while it was written; nothing written (pass --force to overwrite it)", opts.Out)
	}
	if err != nil {
		return fmt.Errorf("write %s: %v", opts.Out, err)
	}
	_, err = fmt.Fprintf(opts.IO.Out, "wrote %s (preset %s). Next:\n  export OPCTL_MYSQL_DSN='user:pass@tcp(host:3306)/db'\n  opctl --config %s schema check\n  opctl --config %s where <biz_id>\n",
		opts.Out, opts.Preset, opts.Out, opts.Out)
	return err
}
