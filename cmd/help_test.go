package cmd

import (
	"context"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
)

// TestHelpFitsEightyColumns walks every command's help (--help, exit 0)
// and checks that each line is at most helpWidth terminal cells: the help
// reads in an 80-column terminal without wrapping.
func TestHelpFitsEightyColumns(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	root := NewCmdRoot(NewFactory(ios, "test"))
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			if sub.Hidden {
				continue
			}
			walk(sub, append(append([]string{}, path...), sub.Name()))
		}
	}
	walk(root, nil)
	if len(paths) < 20 {
		t.Fatalf("walked %d commands: %q", len(paths), paths)
	}
	for _, path := range paths {
		ios, _, out, errOut := iostreams.Test()
		code := Run(context.Background(), ios, append(append([]string{}, path...), "--help"))
		name := strings.Join(append([]string{"opctl"}, path...), " ")
		if code != 0 || out.Len() == 0 {
			t.Errorf("%s --help: exit %d\n%s%s", name, code, out, errOut)
			continue
		}
		for i, l := range strings.Split(out.String(), "\n") {
			if w := ansi.StringWidth(l); w > helpWidth {
				t.Errorf("%s --help, line %d: %d cells:\n%s", name, i+1, w, l)
			}
		}
	}
}
