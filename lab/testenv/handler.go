package testenv

import (
	"context"
	"database/sql"
	"fmt"
)

// Queryer is a *sql.DB or a *sql.Conn.
type Queryer interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// HandlerReads sums the server's Handler_read_* counters of scope
// ("SESSION" or "GLOBAL"): the rows a statement examined, as the
// benchmarks count them (docs/performance.md).
func HandlerReads(ctx context.Context, q Queryer, scope string) (int64, error) {
	if scope != "SESSION" && scope != "GLOBAL" {
		return 0, fmt.Errorf("handler reads: scope %q, want SESSION or GLOBAL", scope)
	}
	rows, err := q.QueryContext(ctx, "SHOW "+scope+" STATUS LIKE 'Handler_read%'")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var sum int64
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, rows.Err()
}
