package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/opctl-dev/opctl/cmd/iostreams"
)

// TestEmbeddedDemo runs the demo exactly as `go run ./lab/demo -o json`
// does: on the embedded go-mysql-server, with no MariaDB involved.
func TestEmbeddedDemo(t *testing.T) {
	t.Parallel()
	ios, _, out, errOut := iostreams.Test()
	code := run(context.Background(), ios, []string{"-o", "json"})
	var rep struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Scenario string `json:"scenario"`
			BizID    string `json:"biz_id"`
			Verdict  string `json:"verdict"`
			Expected string `json:"expected"`
			OK       bool   `json:"ok"`
		} `json:"checks"`
		Repairs []struct {
			Scenario string `json:"scenario"`
			BizID    string `json:"biz_id"`
			Before   string `json:"before"`
			After    string `json:"after"`
			OK       bool   `json:"ok"`
		} `json:"repairs"`
		Invariants []struct {
			Scenario, Name, Detail string
			Holds                  bool
		} `json:"invariants"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d, not JSON: %v\nstdout: %s\nstderr: %s", code, err, out, errOut)
	}
	for _, c := range rep.Checks {
		if !c.OK {
			t.Errorf("%s %s: verdict %s, want %s", c.Scenario, c.BizID, c.Verdict, c.Expected)
		}
	}
	for _, r := range rep.Repairs {
		if !r.OK {
			t.Errorf("repair %s %s: %s before, %s after the redrive", r.Scenario, r.BizID, r.Before, r.After)
		}
	}
	for _, i := range rep.Invariants {
		if !i.Holds {
			t.Errorf("invariant %s %s: %s", i.Scenario, i.Name, i.Detail)
		}
	}
	if code != 0 || !rep.OK || len(rep.Checks) == 0 {
		t.Fatalf("exit %d ok %v checks %d\nstderr: %s", code, rep.OK, len(rep.Checks), errOut)
	}
}
