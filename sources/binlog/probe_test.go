package binlog

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
)

// Probe says what `opctl watch --source auto` decides by: a ROW binlog an
// account with REPLICATION SLAVE and CLIENT can follow gives the head; an
// account without REPLICATION SLAVE fails at the dump, naming the grant.
func TestProbe(t *testing.T) {
	f := newFixture(t)
	head, err := f.reader.Probe(context.Background())
	testenv.Must(t, err, "Probe")
	if head.File == "" || head.Pos < 4 {
		t.Fatalf("head %+v", head)
	}
	user := "nodump" + strings.ReplaceAll(f.db.Name[len(f.db.Name)-6:], "_", "")
	f.db.Exec(t, "CREATE USER '"+user+"'@'%'")
	t.Cleanup(func() { f.db.Exec(t, "DROP USER '"+user+"'@'%'") })
	f.db.Exec(t, "GRANT REPLICATION CLIENT, SELECT ON *.* TO '"+user+"'@'%'")
	dsn := strings.Replace(f.db.DSN, "root@", user+"@", 1)
	r, err := New(dsn, 0, 5*time.Second)
	testenv.Must(t, err, "New")
	_, err = r.Probe(context.Background())
	if err == nil || !strings.Contains(err.Error(), "REPLICATION SLAVE") {
		t.Fatalf("Probe as %s: %v, want a refused dump naming REPLICATION SLAVE", user, err)
	}
	var ue *UnavailableError
	if errors.As(err, &ue) {
		t.Errorf("a missing grant is not a server without a binlog: %v", err)
	}
}
