package mysql_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/mysql"
	"github.com/opctl-dev/opctl/sources/schema"
)

// TestRecordAttemptClipsTheOperator: a long multibyte operator name is
// stored clipped at a character boundary, and an empty detail as NULL JSON.
func TestRecordAttemptClipsTheOperator(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	for _, stmt := range schema.AuditDDL("") { // the tables `opctl schema apply --audit` creates
		db.Exec(t, stmt)
	}
	w, err := mysql.OpenWriter(db.DSN, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	op := "x" + strings.Repeat("é", sources.MaxOperator) // 1 + 2×128 bytes: byte 128 is inside an é
	if err := w.RecordAttempt(ctx, "opctl_audit_attempt", sources.Attempt{PlanID: "p1", BizID: "PAY-1", Operator: op, Outcome: "error"}); err != nil {
		t.Fatalf("RecordAttempt: %v", err)
	}
	var got, detail string
	if err := db.SQL.QueryRow("SELECT operator, COALESCE(JSON_TYPE(detail), CAST(detail AS CHAR)) FROM opctl_audit_attempt").Scan(&got, &detail); err != nil {
		t.Fatal(err)
	}
	// 1 + 63×2 bytes: the 64th é would end at byte 129.
	if want := "x" + strings.Repeat("é", 63); got != want || len(got) != sources.MaxOperator-1 || !utf8.ValidString(got) {
		t.Errorf("operator stored as %q (%d bytes), want %q (%d bytes)", got, len(got), want, len(want))
	}
	if detail != "NULL" && detail != "null" {
		t.Errorf("detail stored as %q, want JSON null", detail)
	}
}
