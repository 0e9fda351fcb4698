package plans

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPlannerIsPure: the planner and the plan file link no driver, no
// database/sql and no Kafka or HTTP client, so every rule runs on plain
// structs (docs/architecture.md).
func TestPlannerIsPure(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps output does not look like a dependency list: %q", out)
	}
	for _, d := range deps {
		switch {
		case d == "database/sql", d == "net/http",
			strings.HasPrefix(d, "github.com/opctl-dev/opctl/sources/"),
			strings.HasPrefix(d, "github.com/IBM/sarama"),
			strings.HasPrefix(d, "github.com/go-sql-driver/"):
			if d != "github.com/opctl-dev/opctl/sources/config" {
				t.Errorf("repair/plans links %s", d)
			}
		}
	}
}
