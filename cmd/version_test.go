package cmd

import (
	"runtime/debug"
	"testing"
)

func TestVersionOf(t *testing.T) {
	cases := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"release", debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{"no version", debug.BuildInfo{}, "(devel)"},
		{"checkout", debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201081500-1a2b3c4d5e6f"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d"}, {Key: "vcs.time", Value: "2026-12-01T08:15:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			"v0.0.0-20261201081500-1a2b3c4d5e6f (rev 1a2b3c4d5e6f, 2026-12-01T08:15:00Z, modified)"},
		{"clean checkout", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}}, "(devel) (rev abc)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := versionOf(&c.bi); got != c.want {
				t.Errorf("versionOf = %q, want %q", got, c.want)
			}
		})
	}
}
