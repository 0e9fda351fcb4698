package connect

import (
	"context"
	"time"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/schema"
)

// DoctorFacts reads every fact opctl doctor judges (docs/doctor.md) for
// the pipelines ps, which share one server (config.Config.ByServer): the
// read path's (tables, snippets, grants, server, samples), the schema
// check's items against needs (the indexes reconcile walks,
// reconcile.IndexNeeds), the write DSN's grants when it is another DSN,
// how far back the binlog reaches, and the cluster's. cfg is the
// configuration with that server's mysql block. A MySQL that cannot be
// reached at all is the error (doctor cannot run); any other failure is
// a fact of its own.
func (c *Clients) DoctorFacts(ctx context.Context, cfg *config.Config, ps []*config.Pipeline, needs []schema.Need) (sources.DoctorFacts, error) {
	// The first pipeline's read path, write path and binlog are theirs.
	reader := c.ReaderFor(ps[0])
	if _, err := reader.Now(ctx); err != nil {
		return sources.DoctorFacts{}, err
	}
	f := reader.DoctorFacts(ctx, cfg, ps)
	if f.MySQLErr == "" {
		rep, err := schema.Check(ctx, reader, ps, needs, cfg.Audit.AuditTable())
		if err != nil {
			f.MySQLErr = err.Error()
		} else {
			for _, it := range rep.Items {
				f.Schema = append(f.Schema, sources.SchemaFact{Pipeline: it.Pipeline, Kind: it.Kind, Table: it.Table, What: it.What,
					OK: it.Status == schema.StatusOK, Index: it.Index, DDL: it.DDL, Checks: it.Checks, Why: it.Why})
			}
		}
		if w := cfg.MySQL.WriteDSN; w != "" && w != cfg.MySQL.DSN {
			g := sources.GrantFacts{}
			if wr, err := c.WriterFor(ps[0]); err != nil {
				g.Err = err.Error()
			} else {
				g = wr.Grants(ctx)
			}
			f.WriteGrants = &g
		}
	}
	// How far back the binlog reaches, from the binlog reader itself (its
	// oldest file's first event), for the binlog check's retention.
	if o, ok := c.Collector.For(ps[0]).Binlog.(interface {
		Oldest(context.Context) (time.Time, error)
	}); ok && anyBinlog(ps) {
		if t, err := o.Oldest(ctx); err == nil {
			f.Server.OldestBinlog = t
		} else if f.Server.BinlogErr == "" {
			f.Server.BinlogErr = err.Error()
		}
	}
	if c.Kafka == nil {
		f.KafkaErr = "no broker configured (" + c.KafkaMissing + ")"
	} else {
		c.Kafka.DoctorFacts(ctx, ps, &f)
	}
	return f, nil
}

// anyBinlog reports whether a pipeline of ps reads a step from the binlog.
func anyBinlog(ps []*config.Pipeline) bool {
	for _, p := range ps {
		if p.UsesBinlog() {
			return true
		}
	}
	return false
}
