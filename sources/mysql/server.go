package mysql

import (
	"context"
	"strings"
)

// gmsBatch is the most operations of a ReadOperations batch on
// go-mysql-server. Its planner takes time exponential in the branches of a
// UNION ALL (measured on v0.20: 4 branches 3 ms, 8 branches 0.1–0.3 s, 12
// branches 14 s, 16 never finished), and a batch of n operations is a
// UNION ALL of the next power of two of n branches.
const gmsBatch = 4

// BatchLimit returns the most operations a ReadOperations batch should
// hold on this server, and why; 0 when the server has no limit of its own
// (MySQL, MariaDB: MaxBatch applies). go-mysql-server (and Dolt, built on
// it) answers @@version_comment with "Dolt". One statement; a server that
// cannot answer it has no limit.
func (r *Reader) BatchLimit(ctx context.Context) (int, string) {
	var comment string
	if err := r.db.QueryRowContext(ctx, "SELECT @@version_comment").Scan(&comment); err != nil {
		return 0, ""
	}
	if strings.EqualFold(strings.TrimSpace(comment), "Dolt") {
		return gmsBatch, "the server is go-mysql-server (@@version_comment Dolt), whose planner takes exponential time on a UNION ALL of many branches"
	}
	return 0, ""
}
