// Command cmd loads a synthetic data set with known anomalies (package
// lab/gen) into a MariaDB/MySQL database and writes its manifest:
//
//	go run ./lab/gen/cmd -dsn 'root@tcp(127.0.0.1:3306)/opctl_bench' -ops 1000000 \
//	    -schema testdata/schema -manifest manifest.json
//
// With -schema it first runs settlement.sql and skip.sql from that folder.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/opctl-dev/opctl/lab/gen"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		dsn      = flag.String("dsn", os.Getenv("OPCTL_MYSQL_DSN"), "go-sql-driver/mysql DSN of the (empty) database")
		ops      = flag.Int("ops", 100000, "operations, split between the pipelines")
		rate     = flag.Float64("anomaly-rate", 0.001, "fraction of operations that are anomalies")
		skipRate = flag.Float64("skip-rate", 0.02, "fraction of orders with a correct SKIPPED record")
		seed     = flag.Uint64("seed", 1, "random seed")
		span     = flag.Duration("span", 24*time.Hour, "operations are spread over this much history")
		aspan    = flag.Duration("anomaly-span", 0, "anomalies only in the newest part of the history (default: all of it)")
		schema   = flag.String("schema", "", "folder with settlement.sql and skip.sql to run first")
		manifest = flag.String("manifest", "manifest.json", "where to write the manifest")
		batch    = flag.Int("batch", 1000, "rows per INSERT")
	)
	flag.Parse()
	if *dsn == "" {
		return fmt.Errorf("-dsn is required (or OPCTL_MYSQL_DSN)")
	}
	cfg, err := gomysql.ParseDSN(*dsn)
	if err != nil {
		return fmt.Errorf("invalid -dsn: %v", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	cfg.MultiStatements = true
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	db.SetMaxOpenConns(8)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *schema != "" {
		for _, f := range []string{"settlement.sql", "skip.sql"} {
			b, err := os.ReadFile(filepath.Join(*schema, f))
			if err != nil {
				return err
			}
			if _, err := db.ExecContext(ctx, string(b)); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
		}
	}
	m, err := gen.Generate(ctx, db, gen.Options{Ops: *ops, AnomalyRate: *rate, SkipRate: *skipRate,
		Seed: *seed, Span: *span, AnomalySpan: *aspan, Batch: *batch})
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(*manifest, append(b, '\n'), 0o644); err != nil {
		return err
	}
	rows := 0
	for _, n := range m.Rows {
		rows += n
	}
	fmt.Fprintf(os.Stderr, "gen: %d operations, %d rows, %d anomalies in %.1fs; manifest %s\n",
		*ops, rows, len(m.Anomalies), m.Seconds, *manifest)
	return nil
}
