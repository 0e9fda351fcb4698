package reconcile

import mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"

// The driver's reader is what a run reads with (sources/connect wires it);
// the package itself links no driver (TestLinks in main_test.go).
var (
	_ DB           = (*mysqlsrc.Reader)(nil)
	_ batchLimiter = (*mysqlsrc.Reader)(nil)
)
