package cmd

import (
	"context"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

func TestNewCmdWatch(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		code     int
		interval time.Duration
		listen   string
	}{
		{[]string{"watch"}, 0, time.Second, DefaultWatchListen},
		{[]string{"watch", "--interval", "250ms", "--listen", "127.0.0.1:0", "--since", "2d"}, 0, 250 * time.Millisecond, "127.0.0.1:0"},
		{[]string{"watch", "--repair", "STRANDED"}, ExitUsage, 0, ""},
		{[]string{"watch", "--interval", "1ms"}, ExitUsage, 0, ""},
		{[]string{"watch", "extra"}, ExitUsage, 0, ""},
	} {
		var got *WatchOptions
		code := runReplaced(t, "watch", func(f *Factory) *cobra.Command {
			return NewCmdWatch(f, func(_ context.Context, o *WatchOptions) error { got = o; return nil })
		}, tc.args...)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d", tc.args, code, tc.code)
			continue
		}
		if tc.code != 0 {
			if got != nil {
				t.Errorf("%v: ran with %+v", tc.args, got)
			}
			continue
		}
		if got == nil || got.Interval != tc.interval || got.Listen != tc.listen {
			t.Errorf("%v: options %+v", tc.args, got)
		}
	}
}
