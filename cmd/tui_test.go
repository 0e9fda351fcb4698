package cmd

import (
	"context"
	"errors"
	stdio "io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/tui"
)

func TestNewCmdTUI(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want func(*TUIOptions) bool
	}{
		{[]string{}, 0, func(o *TUIOptions) bool {
			return o.BizID == "" && o.Since == time.Hour && o.Refresh == 10*time.Second && o.OlderThan == 5*time.Minute && !o.ReadOnly && o.Operator != ""
		}},
		{[]string{"PAY-1", "--pipeline", "settlement", "--since", "1d", "--refresh", "5s", "--older-than", "0s", "--readonly", "--incident", "INC-4711", "--operator", "alice"}, 0,
			func(o *TUIOptions) bool {
				return o.BizID == "PAY-1" && o.Pipeline == "settlement" && o.Since == 24*time.Hour && o.Refresh == 5*time.Second &&
					o.OlderThan == 0 && o.ReadOnly && o.Incident == "INC-4711" && o.Operator == "alice"
			}},
		{[]string{"PAY-1", "PAY-2"}, ExitUsage, nil},
		{[]string{"PAY\x1b[2J"}, ExitUsage, nil},
		{[]string{"--refresh", "0s"}, ExitUsage, nil},
		{[]string{"--since", "soon"}, ExitUsage, nil},
		{[]string{"--incident", "INC\x1b[2J"}, ExitUsage, nil},
		{[]string{"--incident", strings.Repeat("i", 129)}, ExitUsage, nil},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			io, _, _, _ := iostreams.Test()
			f := NewFactory(io, "test")
			var got *TUIOptions
			c := NewCmdTUI(f, func(_ context.Context, o *TUIOptions) error { got = o; return nil })
			c.SetFlagErrorFunc(func(_ *cobraCommand, err error) error { return &UsageError{Err: err} })
			c.SetArgs(tc.args)
			c.SetOut(io.Out)
			c.SetErr(io.ErrOut)
			err := c.Execute()
			if code := exitCode(err, false); code != tc.code {
				t.Fatalf("exit %d (%v), want %d", code, err, tc.code)
			}
			if tc.want != nil && (got == nil || !tc.want(got)) {
				t.Errorf("options %+v", got)
			}
		})
	}
}

// Without a terminal the console refuses, before reading any config.
func TestTUINeedsATerminal(t *testing.T) {
	code, _, errOut := runCLI(context.Background(), false, "tui", "--config", "/nonexistent.yaml")
	if code != ExitUsage || !strings.Contains(errOut, "opctl tui needs a terminal") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// opctl tui runs the console in this process (no second binary to find or
// to be stale): the options it parsed are the console's.
func TestTUIRunsTheConsoleInProcess(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	ios.SetStdinTTY(true)
	ios.SetStdoutTTY(true)
	ios.SetNoColor(true)
	f := NewFactory(ios, "test")
	var got *tui.Options
	c := NewCmdTUI(f, func(ctx context.Context, o *TUIOptions) error {
		o.Config = func() (*config.Config, error) {
			return config.Load(filepath.Join("..", "testdata", "config", "settlement.yaml"))
		}
		o.Run = func(_ context.Context, _ stdio.Reader, _ stdio.Writer, to tui.Options) error { got = &to; return nil }
		return runTUI(ctx, o)
	})
	c.SetArgs([]string{"PAY-1", "--pipeline", "settlement", "--readonly", "--incident", "INC-1", "--operator", "alice"})
	c.SetOut(ios.Out)
	c.SetErr(ios.ErrOut)
	if err := c.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.BizID != "PAY-1" || got.Pipeline != "settlement" || len(got.Pipelines) != 1 || got.Pipelines[0].Name != "settlement" ||
		!got.ReadOnly || got.Incident != "INC-1" || got.Operator != "alice" || got.Color || got.Since != tui.DefaultSince || got.Refresh != tui.DefaultRefresh {
		t.Fatalf("console options %+v", got)
	}
}

// --watch URL is handed to the console with --timeout and a 2s refresh;
// a URL that is not one, and --since with it, are usage errors.
func TestTUIWatchFlag(t *testing.T) {
	var timeout time.Duration
	run := func(args ...string) (*tui.Options, error) {
		ios, _, _, _ := iostreams.Test()
		ios.SetStdinTTY(true)
		ios.SetStdoutTTY(true)
		f := NewFactory(ios, "test")
		var got *tui.Options
		c := NewCmdTUI(f, func(ctx context.Context, o *TUIOptions) error {
			timeout = o.Timeout
			o.Config = func() (*config.Config, error) { return nil, errors.New("no config here") }
			o.Run = func(_ context.Context, _ stdio.Reader, _ stdio.Writer, to tui.Options) error { got = &to; return nil }
			return runTUI(ctx, o)
		})
		f.Globals.Timeout = 3 * time.Second
		c.SetArgs(args)
		c.SetOut(ios.Out)
		c.SetErr(ios.ErrOut)
		return got, c.ExecuteContext(context.Background())
	}
	got, err := run("--watch", "http://127.0.0.1:9464")
	if err != nil || got == nil || got.Watch != "http://127.0.0.1:9464" || got.Refresh != tui.DefaultWatchRefresh || got.Targets == nil || timeout != 3*time.Second {
		t.Fatalf("err %v, options %+v", err, got)
	}
	for _, args := range [][]string{{"--watch", "127.0.0.1:9464"}, {"--watch", "http://x:1", "--since", "2h"}} {
		if _, err := run(args...); err == nil || exitCode(err, false) != ExitUsage {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
