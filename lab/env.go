// Package lab is the incident lab: it reproduces the seed incidents with real
// consumers (lab/consumer, on sarama consumer groups), real faults (a broker
// that refuses commits, an RPC that times out at the caller but takes effect
// at the callee, a rebalance, out-of-order events, a consumer that dies
// mid-operation), real HTTP downstream services (lab/downstream) and an
// in-process Kafka-protocol cluster (lab/cluster), on a real MySQL-protocol
// database. The demo (`go run ./lab/demo`) and the integration tests run it.
package lab

import (
	"context"
	"crypto/rand"
	"database/sql"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/opctl-dev/opctl/lab/cluster"
	"github.com/opctl-dev/opctl/lab/consumer"
	"github.com/opctl-dev/opctl/lab/downstream"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/schema"
)

//go:embed schema.sql
var schemaSQL string

//go:embed opctl.yaml.tmpl
var configTmpl string

// The seeds' own schemas, each kept identical to testdata/schema/seedNNN.sql
// below its header (TestSeedSchemaIsTestdata).
var (
	//go:embed schema_seed000.sql
	seed000SQL string
	//go:embed schema_seed001.sql
	seed001SQL string
	//go:embed schema_seed003.sql
	seed003SQL string
)

// Topics are the lab's topics with their partition counts.
func Topics() map[string]int32 {
	return map[string]int32{
		"settlement-event": 8, "settlement-anchored": 8,
		"order-fulfilment": 8, "fulfilment-anchored": 8,
		"order-event": 8, "order-event-anchored": 8,
		"settlement-seed": 8, "fulfilment-seed": 8, "order-event-seed": 8,
	}
}

// Options say where the lab runs.
type Options struct {
	// MySQLDSN reaches the server the lab creates its database on. Its
	// database name, if any, is ignored: the lab makes its own and drops it.
	MySQLDSN string
	// SerialWrites sends every statement of the lab's consumers through one
	// connection. The embedded go-mysql-server (lab/demo) loses rows when
	// two connections commit to one in-memory table at the same time.
	SerialWrites bool
	// Timings are the waits and group timings (consumer.Config.Timings) of
	// every consumer the lab starts: the scenarios' and Repair's fixed
	// ones. Zero fields keep the consumer's defaults (the demo's); tests
	// give consumer.FastTimings, so that a commit is not held behind a
	// parked fetch, a joining member is noticed within 100ms and a failed
	// commit is followed by a rejoin at once. They change how soon things
	// happen, never what happens: each scenario waits for the events it
	// needs, and its windows are set by faults, RPC timeouts and leases,
	// which Timings do not touch.
	Timings consumer.Timings
}

// Env is a running lab: a database with the lab schema, the seeds' own
// schemas in databases of their own, a Kafka cluster, three sets of
// downstream services (one for the naive consumers, one for the anchored
// ones, one for the seeds' own consumers, so that a probe by biz_id never
// sees another family's effects) and an opctl.yaml that points opctl at all
// of it.
type Env struct {
	DB *sql.DB
	// DSN reaches the lab database (parseTime, UTC).
	DSN      string
	DBName   string
	Cluster  *cluster.Cluster
	Naive    *downstream.Set
	Anchored *downstream.Set
	// Seeds are the downstream services of the seed pipelines
	// (settlement_seed, fulfilment_seed, orders_seed), answering at the
	// paths the seeds' presets use (lab/downstream).
	Seeds *downstream.Set
	// ConfigPath is the rendered opctl.yaml; Config is it loaded.
	ConfigPath string
	Config     *config.Config

	// Seed001 and Seed003 hold seeds 001's and 003's own schemas
	// (pipelines fulfilment_seed and orders_seed, SeedScenarios), on every
	// server. Seed000 holds seed 000's (pipeline settlement_seed,
	// BinlogScenarios) only when the server keeps a ROW binlog (Binlog):
	// its double debit is in no table.
	Seed000, Seed001, Seed003 SeedDB
	Binlog                    bool

	root *sql.DB
	// inflight are consumers a scenario left running (in-flight-lease).
	inflight []*consumer.Consumer
	// timings are Options.Timings.
	timings consumer.Timings
	tmpDir  string
	closer  []func()
}

// SeedDB is a database holding one seed's own schema, as its team has it:
// <lab database>_seedNNN. Its Name is empty when the lab has none.
type SeedDB struct {
	Name string
	DB   *sql.DB
}

// Start creates the lab database, loads the schema, starts the cluster and the
// downstream services and writes the config. On error everything started so
// far is stopped again.
func Start(ctx context.Context, opts Options) (_ *Env, err error) {
	e := &Env{timings: opts.Timings}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	cfg, err := mysql.ParseDSN(opts.MySQLDSN)
	if err != nil {
		return nil, fmt.Errorf("lab: MySQL DSN %s: %v", config.RedactDSN(opts.MySQLDSN), err)
	}
	cfg.DBName = ""
	cfg.ParseTime = true
	cfg.MultiStatements = false
	if cfg.Loc == nil {
		cfg.Loc = time.UTC
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	e.root, err = sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := e.root.PingContext(pctx); err != nil {
		return nil, fmt.Errorf("lab: MySQL at %s is not reachable: %v", cfg.Addr, err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	e.DBName = "opctl_lab_" + hex.EncodeToString(b)
	if _, err := e.root.ExecContext(ctx, "CREATE DATABASE "+config.QuoteIdent(e.DBName)); err != nil {
		return nil, fmt.Errorf("lab: create database %s on %s: %v", e.DBName, cfg.Addr, err)
	}
	cfg.DBName = e.DBName
	e.DSN = cfg.FormatDSN()
	e.DB, err = sql.Open("mysql", e.DSN)
	if err != nil {
		return nil, err
	}
	e.DB.SetMaxOpenConns(64)
	if opts.SerialWrites {
		e.DB.SetMaxOpenConns(1)
	}
	for _, stmt := range SplitSQL(schemaSQL) {
		if _, err := e.DB.ExecContext(ctx, stmt); err != nil {
			return nil, fmt.Errorf("lab: schema: %v\n%s", err, stmt)
		}
	}

	if err := e.startSeeds(ctx, cfg, opts.SerialWrites); err != nil {
		return nil, err
	}

	if e.Cluster, err = cluster.Start(Topics()); err != nil {
		return nil, fmt.Errorf("lab: kafka cluster: %v", err)
	}
	if e.Naive, err = downstream.StartSet(); err != nil {
		return nil, fmt.Errorf("lab: downstream services: %v", err)
	}
	if e.Anchored, err = downstream.StartSet(); err != nil {
		return nil, fmt.Errorf("lab: downstream services: %v", err)
	}
	if e.Seeds, err = downstream.StartSet(); err != nil {
		return nil, fmt.Errorf("lab: downstream services: %v", err)
	}
	if e.tmpDir, err = os.MkdirTemp("", "opctl-lab-"); err != nil {
		return nil, err
	}
	e.ConfigPath = filepath.Join(e.tmpDir, "opctl.yaml")
	if err := os.WriteFile(e.ConfigPath, []byte(e.RenderConfig()), 0o600); err != nil {
		return nil, err
	}
	if e.Config, err = config.Load(e.ConfigPath); err != nil {
		return nil, fmt.Errorf("lab: generated config does not load: %v", err)
	}
	// opctl's audit tables, as `opctl schema apply --audit` creates them:
	// repairs (the demo's and a person's on a kept lab) record there.
	for _, stmt := range schema.AuditDDL(e.Config.Audit.AuditTable()) {
		if _, err := e.DB.ExecContext(ctx, stmt); err != nil {
			return nil, fmt.Errorf("lab: audit tables: %v", err)
		}
	}
	return e, nil
}

// RenderConfig returns the lab's opctl.yaml, with the lab's DSN as it is
// (its password, if any, included): the file opctl reads.
func (e *Env) RenderConfig() string { return e.renderConfig(e.DSN) }

// DisplayConfig is RenderConfig with the DSN's password replaced by ***
// (config.RedactDSN): the config as it is shown, never written.
func (e *Env) DisplayConfig() string { return e.renderConfig(config.RedactDSN(e.DSN)) }

func (e *Env) renderConfig(dsn string) string {
	t := template.Must(template.New("opctl.yaml").Parse(configTmpl))
	quoted := make([]string, len(e.Cluster.Brokers))
	for i, b := range e.Cluster.Brokers {
		quoted[i] = fmt.Sprintf("%q", b)
	}
	var sb strings.Builder
	_ = t.Execute(&sb, map[string]any{
		"DSN":         dsn,
		"BrokersYAML": strings.Join(quoted, ", "),
		"Naive":       e.Naive.URLs(),
		"Anchored":    e.Anchored.URLs(),
		"Seeds":       e.Seeds.URLs(),
		"Seed000DB":   e.Seed000.Name,
		"Seed001DB":   e.Seed001.Name,
		"Seed003DB":   e.Seed003.Name,
	})
	return sb.String()
}

// URLs returns the consumer's view of a downstream set.
func URLs(s *downstream.Set) consumer.URLs {
	u := s.URLs()
	return consumer.URLs{Notify: u.Notify, WMS: u.WMS, Logistics: u.Logistics, Points: u.Points}
}

// onClose registers cleanup run by Close in reverse order.
func (e *Env) onClose(f func()) { e.closer = append(e.closer, f) }

// Close stops everything the lab started, drops its database and removes
// the temporary config directory.
func (e *Env) Close() {
	for _, c := range e.inflight {
		c.Kill()
	}
	e.inflight = nil
	for i := len(e.closer) - 1; i >= 0; i-- {
		e.closer[i]()
	}
	e.closer = nil
	if e.Naive != nil {
		e.Naive.Close()
	}
	if e.Anchored != nil {
		e.Anchored.Close()
	}
	if e.Seeds != nil {
		e.Seeds.Close()
	}
	if e.Cluster != nil {
		e.Cluster.Close()
	}
	if e.DB != nil {
		e.DB.Close()
	}
	seeds := []SeedDB{e.Seed000, e.Seed001, e.Seed003}
	for _, s := range seeds {
		if s.DB != nil {
			s.DB.Close()
		}
	}
	if e.root != nil {
		for _, name := range []string{e.DBName, seeds[0].Name, seeds[1].Name, seeds[2].Name} {
			if name == "" {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, _ = e.root.ExecContext(ctx, "DROP DATABASE IF EXISTS "+config.QuoteIdent(name))
			cancel()
		}
		e.root.Close()
	}
	if e.tmpDir != "" {
		os.RemoveAll(e.tmpDir)
	}
}

// startSeeds creates the seeds' own schemas, each in a database of its own
// (their tables share names with the lab's: orders, idempotent,
// fulfil_order): seed 001's and seed 003's always, seed 000's
// (schema_seed000.sql: no journal, no state table) only when the server
// keeps a ROW binlog, the only place its double debit can be seen (not the
// embedded server of lab/demo, nor a server with log_bin off).
func (e *Env) startSeeds(ctx context.Context, cfg *mysql.Config, serial bool) error {
	var logBin int
	var format string
	if err := e.DB.QueryRowContext(ctx, "SELECT @@log_bin, @@binlog_format").Scan(&logBin, &format); err == nil && logBin != 0 && strings.EqualFold(format, "ROW") {
		e.Binlog = true
	}
	for _, s := range []struct {
		n   string
		dst *SeedDB
		sql string
		on  bool
	}{
		{"000", &e.Seed000, seed000SQL, e.Binlog},
		{"001", &e.Seed001, seed001SQL, true},
		{"003", &e.Seed003, seed003SQL, true},
	} {
		if !s.on {
			continue
		}
		name := e.DBName + "_seed" + s.n
		if _, err := e.root.ExecContext(ctx, "CREATE DATABASE "+config.QuoteIdent(name)); err != nil {
			return fmt.Errorf("lab: create database %s: %v", name, err)
		}
		s.dst.Name = name
		c := *cfg
		c.DBName = name
		db, err := sql.Open("mysql", c.FormatDSN())
		if err != nil {
			return err
		}
		s.dst.DB = db
		if serial {
			db.SetMaxOpenConns(1)
		}
		for _, stmt := range SplitSQL(s.sql) {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("lab: seed %s schema: %v\n%s", s.n, err, stmt)
			}
		}
	}
	return nil
}

// SplitSQL splits a schema file (lab/schema.sql, testdata/schema/*.sql) on
// statement-ending semicolons (";" at the end of a line), dropping comment
// lines and the chunks left empty, so that a server without
// multiStatements runs it statement by statement.
func SplitSQL(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ";\n") {
		var lines []string
		for _, l := range strings.Split(part, "\n") {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "--") {
				lines = append(lines, l)
			}
		}
		if len(lines) > 0 {
			out = append(out, strings.Join(lines, "\n"))
		}
	}
	return out
}
