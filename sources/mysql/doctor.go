package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// DoctorSamples is how many state rows the partitioner check samples per
// pipeline.
const DoctorSamples = 100

// DoctorFacts reads what `opctl doctor` judges from the read path
// (docs/doctor.md): the database name, each configured table's columns
// (information_schema), each configured SQL snippet prepared on the server
// (never executed), the read user's SHOW GRANTS, the server's time zone and
// binlog variables with SHOW BINARY LOGS, and a sample of state rows with a
// stored partition: the DoctorSamples most recent rows when an index leads
// with updated_at or created_at, else those with the greatest keys (a
// bounded walk of an index either way). Every statement is read-only; each
// fact that could not be read holds why. The schema check's items and the
// Kafka facts are filled by their own readers.
func (r *Reader) DoctorFacts(ctx context.Context, cfg *config.Config, pipelines []*config.Pipeline) sources.DoctorFacts {
	f := sources.DoctorFacts{Tables: map[string]sources.TableFacts{}, Pipelines: map[string]sources.PipelineFacts{}}
	if err := r.db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&f.Database); err != nil {
		f.MySQLErr = r.queryError("read the database name", err).Error()
		return f
	}
	for _, p := range pipelines {
		for _, t := range configuredTables(p) {
			if _, ok := f.Tables[t]; ok {
				continue
			}
			ti, err := r.TableInfo(ctx, t)
			if err != nil {
				f.MySQLErr = err.Error()
				return f
			}
			f.Tables[t] = sources.TableFacts{Exists: ti.Exists, Columns: ti.Columns, Types: ti.Types}
		}
		for _, sn := range snippets(p) {
			fact := sources.SnippetFact{Pipeline: p.Name, What: sn[0]}
			if err := r.prepare(ctx, sn[1]); err != nil {
				fact.Err = err.Error()
			}
			f.Snippets = append(f.Snippets, fact)
		}
		pf := f.Pipelines[p.Name]
		pf.Samples, pf.SampleErr = r.partitionSamples(ctx, p)
		f.Pipelines[p.Name] = pf
	}
	f.ReadGrants = grantsOf(ctx, r, r.db)
	f.Server = r.serverFacts(ctx)
	return f
}

// Grants is the write path user's SHOW GRANTS.
func (w *Writer) Grants(ctx context.Context) sources.GrantFacts { return grantsOf(ctx, w.r, w.r.db) }

// configuredTables are the tables a pipeline names outside its snippets.
func configuredTables(p *config.Pipeline) []string {
	var out []string
	if p.State != nil {
		out = append(out, p.State.Table)
	}
	if p.Idempotency != nil {
		out = append(out, p.Idempotency.Table)
	}
	for _, s := range p.Steps {
		if s.Scan != nil {
			out = append(out, s.Scan.Table)
		}
	}
	if p.Entity != nil && p.Entity.Table != "" {
		out = append(out, p.Entity.Table)
	}
	return out
}

// snippets are a pipeline's SELECT snippets with their names.
func snippets(p *config.Pipeline) [][2]string {
	var out [][2]string
	for _, s := range p.Steps {
		if s.Evidence != "" {
			out = append(out, [2]string{"step " + s.Name + " evidence", s.Evidence})
		}
		if s.Intent != "" {
			out = append(out, [2]string{"step " + s.Name + " intent", s.Intent})
		}
	}
	if p.Entity != nil && p.Entity.Query != "" {
		out = append(out, [2]string{"entity.query", p.Entity.Query})
	}
	return out
}

// prepare prepares query on the server and closes it: the server checks
// its tables, columns and the user's SELECT grant; nothing runs.
func (r *Reader) prepare(ctx context.Context, query string) error {
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return r.queryError("prepare", err)
	}
	defer conn.Close()
	st, err := conn.PrepareContext(ctx, query)
	if err != nil {
		return fmt.Errorf("%s", scrub(err.Error(), r.passwd))
	}
	return st.Close()
}

// grantsOf reads the current user and its SHOW GRANTS, and the server's
// read-only variables.
func grantsOf(ctx context.Context, r *Reader, db *sql.DB) sources.GrantFacts {
	var g sources.GrantFacts
	if on, err := readOnly(ctx, r); err != nil {
		g.ReadOnlyErr = err.Error()
	} else {
		g.ReadOnly = on
	}
	if err := db.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&g.User); err != nil {
		g.Err = r.queryError("read the current user", err).Error()
		return g
	}
	rows, err := db.QueryContext(ctx, "SHOW GRANTS")
	if err != nil {
		g.Err = r.queryError("SHOW GRANTS", err).Error()
		return g
	}
	defer rows.Close()
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			g.Err = err.Error()
			return g
		}
		g.Lines = append(g.Lines, l)
	}
	if err := rows.Err(); err != nil {
		g.Err = err.Error()
	}
	return g
}

// serverFacts reads the time zone and binlog variables and SHOW BINARY
// LOGS.
func (r *Reader) serverFacts(ctx context.Context) sources.ServerFacts {
	var s sources.ServerFacts
	var logBin sql.NullString
	var format, image sql.NullString
	err := r.db.QueryRowContext(ctx, "SELECT @@global.time_zone, @@system_time_zone, @@log_bin, @@binlog_format, @@binlog_row_image").
		Scan(&s.TimeZone, &s.SystemTimeZone, &logBin, &format, &image)
	if err != nil {
		s.Err = r.queryError("read the server variables", err).Error()
		return s
	}
	s.LogBin = logBin.String == "1" || strings.EqualFold(logBin.String, "ON")
	s.BinlogFormat, s.BinlogRowImage = format.String, image.String
	if !s.LogBin {
		return s
	}
	rows, err := r.db.QueryContext(ctx, "SHOW BINARY LOGS")
	if err != nil {
		s.BinlogErr = r.queryError("SHOW BINARY LOGS", err).Error()
		return s
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			s.BinlogErr = err.Error()
			return s
		}
		if b, ok := vals[0].([]byte); ok {
			s.BinaryLogs = append(s.BinaryLogs, string(b))
		} else {
			s.BinaryLogs = append(s.BinaryLogs, fmt.Sprint(vals[0]))
		}
	}
	if err := rows.Err(); err != nil {
		s.BinlogErr = err.Error()
	}
	return s
}

// partitionSamples reads at most DoctorSamples state rows with a stored
// partition (see DoctorFacts for which).
func (r *Reader) partitionSamples(ctx context.Context, p *config.Pipeline) ([]sources.PartitionSample, string) {
	st := p.State
	if st == nil || st.Partition == "" {
		return nil, ""
	}
	msg := "''"
	if st.MsgID != "" {
		msg = config.QuoteIdent(st.MsgID)
	}
	key, part := config.QuoteIdent(st.Key), config.QuoteIdent(st.Partition)
	// The most recent rows when an index leads with a time column (a
	// bounded backward walk of it), else those with the greatest keys.
	order := key
	if ti, err := r.TableInfo(ctx, st.Table); err == nil {
		for _, col := range []string{st.UpdatedAt, st.CreatedAt} {
			if _, ok := ti.IndexFor(col); col != "" && ok {
				order = config.QuoteIdent(col)
				break
			}
		}
	}
	q := fmt.Sprintf("SELECT %s, %s, %s FROM %s WHERE %s IS NOT NULL ORDER BY %s DESC LIMIT %d",
		key, msg, part, config.QuoteIdent(st.Table), part, order, DoctorSamples)
	rows, err := r.db.QueryContext(ctx, q)
	if err != nil {
		return nil, r.queryError("sample "+st.Table, err).Error()
	}
	defer rows.Close()
	var out []sources.PartitionSample
	for rows.Next() {
		var s sources.PartitionSample
		var msgID sql.NullString
		if err := rows.Scan(&s.BizID, &msgID, &s.Partition); err != nil {
			return nil, err.Error()
		}
		s.MsgID = msgID.String
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, err.Error()
	}
	return out, ""
}
