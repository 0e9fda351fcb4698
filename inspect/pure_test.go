package inspect

import (
	"os/exec"
	"strings"
	"testing"
)

// TestInspectIsPure: inspect imports the sources types, never a driver,
// database/sql or a network client, so every verdict rule is testable
// without a database (docs/architecture.md).
func TestInspectIsPure(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps output does not look like a dependency list: %q", out)
	}
	for _, d := range deps {
		if d == "database/sql" || d == "net/http" || strings.HasPrefix(d, "github.com/IBM/sarama") || strings.HasPrefix(d, "github.com/go-sql-driver/") ||
			(strings.HasPrefix(d, "github.com/opctl-dev/opctl/sources/") && d != "github.com/opctl-dev/opctl/sources/config") {
			t.Errorf("inspect links %s", d)
		}
	}
}
