package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-sql-driver/mysql"

	"github.com/opctl-dev/opctl/lab"
	"github.com/opctl-dev/opctl/lab/cluster"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/schema"
)

// env is one seed's world: a fresh database holding the seed's own schema
// (lab/schema_seedNNN.sql, unmodified) on a server, a Kafka cluster with
// the seed's topic, and the downstream journals its probes read.
type env struct {
	root   *sql.DB // the server, no database
	db     *sql.DB // the bench database (multiStatements)
	dsn    string  // reaches the bench database (what opctl gets)
	name   string  // the bench database
	kafka  *cluster.Cluster
	probes *probes
	dir    string // config and temporary files
	config string // the preset, written there
}

// dbPrefix names every database the tool creates; close drops it again.
const dbPrefix = "opctl_seedbench_"

// newEnv creates the database (dbPrefix + seed + a random suffix) on the
// server rootDSN reaches, loads the seed's schema file and opctl's audit
// tables (`opctl schema apply --audit`), starts a Kafka cluster with
// topic (partitions) and the probe server, and writes the seed's preset.
func newEnv(ctx context.Context, repo, rootDSN, seed, topic string, partitions int32) (_ *env, err error) {
	e := &env{}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	cfg, err := rootConfig(rootDSN)
	if err != nil {
		return nil, err
	}
	if e.root, err = sql.Open("mysql", cfg.FormatDSN()); err != nil {
		return nil, err
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	e.name = dbPrefix + seed + "_" + hex.EncodeToString(b)
	if _, err := e.root.ExecContext(ctx, "CREATE DATABASE "+config.QuoteIdent(e.name)); err != nil {
		return nil, fmt.Errorf("create database %s: %v", e.name, err)
	}
	cfg.DBName = e.name
	cfg.MultiStatements = false // opctl gets the DSN a user would write
	e.dsn = cfg.FormatDSN()
	cfg.MultiStatements = true
	if e.db, err = sql.Open("mysql", cfg.FormatDSN()); err != nil {
		return nil, err
	}
	e.db.SetMaxOpenConns(8)
	ddl, err := os.ReadFile(filepath.Join(repo, "lab", "schema_seed"+seed+".sql"))
	if err != nil {
		return nil, err
	}
	stmts := append(lab.SplitSQL(string(ddl)), schema.AuditDDL("opctl_audit")...)
	for _, s := range stmts {
		if _, err := e.db.ExecContext(ctx, s); err != nil {
			return nil, fmt.Errorf("schema: %v\n%s", err, s)
		}
	}
	if e.kafka, err = cluster.Start(map[string]int32{topic: partitions}); err != nil {
		return nil, err
	}
	if e.probes, err = startProbes(); err != nil {
		return nil, err
	}
	if e.dir, err = os.MkdirTemp("", "opctl-seedbench-"); err != nil {
		return nil, err
	}
	preset, err := config.Preset("seed" + seed)
	if err != nil {
		return nil, err
	}
	e.config = filepath.Join(e.dir, "opctl.yaml")
	return e, os.WriteFile(e.config, preset, 0o600)
}

// rootConfig parses dsn for the server itself: no database, parseTime,
// UTC.
func rootConfig(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("DSN %s: %v", config.RedactDSN(dsn), err)
	}
	cfg.DBName = ""
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	return cfg, nil
}

// openRoot opens the server dsn reaches, without a database.
func openRoot(dsn string) (*sql.DB, error) {
	cfg, err := rootConfig(dsn)
	if err != nil {
		return nil, err
	}
	return sql.Open("mysql", cfg.FormatDSN())
}

// opctlEnv is the environment the preset reads (${OPCTL_MYSQL_DSN}, ...).
func (e *env) opctlEnv(binlogDSN string) map[string]string {
	m := map[string]string{
		"OPCTL_MYSQL_DSN": e.dsn, "OPCTL_BROKERS": e.kafka.Brokers[0],
		"OPCTL_WMS_URL": e.probes.url, "OPCTL_LOGISTICS_URL": e.probes.url, "OPCTL_POINTS_URL": e.probes.url,
	}
	if binlogDSN != "" {
		m["OPCTL_BINLOG_DSN"] = binlogDSN
	}
	return m
}

// close drops the database and stops what newEnv started.
func (e *env) close() {
	if e.probes != nil {
		e.probes.close()
	}
	if e.kafka != nil {
		e.kafka.Close()
	}
	if e.db != nil {
		e.db.Close()
	}
	if e.root != nil {
		if e.name != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, _ = e.root.ExecContext(ctx, "DROP DATABASE IF EXISTS "+config.QuoteIdent(e.name))
			cancel()
		}
		e.root.Close()
	}
	if e.dir != "" {
		os.RemoveAll(e.dir)
	}
}

// insertRows writes rows into table (columns cols) with multi-row INSERTs
// of up to 1000 rows, 4 statements at a time. Every value is bound.
func (e *env) insertRows(ctx context.Context, table string, cols []string, rows [][]any) error {
	const per = 1000
	head := "INSERT INTO " + config.QuoteIdent(table) + " ("
	for i, c := range cols {
		if i > 0 {
			head += ", "
		}
		head += config.QuoteIdent(c)
	}
	head += ") VALUES "
	tuple := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
	var chunks [][][]any
	for i := 0; i < len(rows); i += per {
		chunks = append(chunks, rows[i:min(i+per, len(rows))])
	}
	return parallel(4, len(chunks), func(i int) error {
		c := chunks[i]
		var sb strings.Builder
		sb.WriteString(head)
		args := make([]any, 0, len(c)*len(cols))
		for j, r := range c {
			if j > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(tuple)
			args = append(args, r...)
		}
		_, err := e.db.ExecContext(ctx, sb.String(), args...)
		if err != nil {
			return fmt.Errorf("insert into %s: %v", table, err)
		}
		return nil
	})
}

// parallel runs fn(0..n-1) on k goroutines and returns the first error.
func parallel(k, n int, fn func(int) error) error {
	var (
		mu   sync.Mutex
		next int
		err  error
		wg   sync.WaitGroup
	)
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := err != nil || i >= n
				mu.Unlock()
				if stop {
					return
				}
				if e := fn(i); e != nil {
					mu.Lock()
					if err == nil {
						err = e
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return err
}

// record is one message of the seed's topic: key, JSON value, timestamp.
type record struct {
	key   string
	value any
	ts    time.Time
}

// produce writes recs to topic, each on the partition the Java client's
// murmur2 partitioner gives its key (the presets' `partitioner: murmur2`),
// with its timestamp, then commits the group at every partition's log end:
// the consumer has processed and committed everything (commit:
// after_steps).
func (e *env) produce(topic, group string, partitions int32, recs []record) error {
	conf := sarama.NewConfig()
	conf.Version = sarama.V3_5_0_0
	conf.ClientID = "opctl-seedbench"
	conf.Metadata.AllowAutoTopicCreation = false
	conf.Producer.RequiredAcks = sarama.WaitForLocal
	conf.Producer.Return.Successes = false
	conf.Producer.Return.Errors = true
	conf.Producer.Partitioner = sarama.NewManualPartitioner
	conf.Producer.Flush.Messages = 2000
	conf.Producer.Flush.Frequency = 5 * time.Millisecond
	conf.Producer.MaxMessageBytes = 4 << 20
	client, err := sarama.NewClient(e.kafka.Brokers, conf)
	if err != nil {
		return err
	}
	defer client.Close()
	p, err := sarama.NewAsyncProducerFromClient(client)
	if err != nil {
		return err
	}
	var (
		errs  []error
		errMu sync.Mutex
		done  = make(chan struct{})
	)
	go func() {
		for pe := range p.Errors() {
			errMu.Lock()
			errs = append(errs, pe.Err)
			errMu.Unlock()
		}
		close(done)
	}()
	for _, r := range recs {
		v, err := json.Marshal(r.value)
		if err != nil {
			return err
		}
		part, err := sources.PartitionFor(config.PartitionerMurmur2, []byte(r.key), partitions)
		if err != nil {
			return err
		}
		p.Input() <- &sarama.ProducerMessage{Topic: topic, Partition: part, Key: sarama.StringEncoder(r.key),
			Value: sarama.ByteEncoder(v), Timestamp: r.ts}
	}
	p.AsyncClose()
	<-done
	if len(errs) > 0 {
		return fmt.Errorf("produce: %d error(s), first: %v", len(errs), errs[0])
	}
	coord, err := client.Coordinator(group)
	if err != nil {
		return err
	}
	req := sarama.NewOffsetCommitRequest(conf, group)
	req.ConsumerGroupGeneration = sarama.GroupGenerationUndefined
	for part := range partitions {
		end, err := client.GetOffset(topic, part, sarama.OffsetNewest)
		if err != nil {
			return err
		}
		req.AddBlockWithLeaderEpoch(topic, part, end, -1, 0, "")
	}
	resp, err := coord.CommitOffset(req)
	if err != nil {
		return err
	}
	for part, kerr := range resp.Errors[topic] {
		if !errors.Is(kerr, sarama.ErrNoError) {
			return fmt.Errorf("commit %s/%d: %v", topic, part, kerr)
		}
	}
	return nil
}

// probes answers the seeds' downstream journals, as the presets' probes
// read them: GET /locks?biz_id=X (WMS), /waybills?biz_id=X (logistics),
// /grants?order_id=X (points), each {"count": N}. The counts are the
// generator's; a redrive (POST /grant) is refused: the benchmark repairs
// nothing.
type probes struct {
	url    string
	srv    *http.Server
	mu     sync.RWMutex
	counts map[string]map[string]int // path → key → count
	calls  map[string]int
}

func startProbes() (*probes, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &probes{url: "http://" + ln.Addr().String(), counts: map[string]map[string]int{}, calls: map[string]int{}}
	mux := http.NewServeMux()
	for path, param := range map[string]string{"/locks": "biz_id", "/waybills": "biz_id", "/grants": "order_id"} {
		p.counts[path] = map[string]int{}
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			k := r.URL.Query().Get(param)
			p.mu.Lock()
			n := p.counts[path][k]
			p.calls[path]++
			p.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"count": %d}`, n)
		})
	}
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// set records n effects of key in the journal at path.
func (p *probes) set(path, key string, n int) {
	p.mu.Lock()
	p.counts[path][key] = n
	p.mu.Unlock()
}

// takeCalls returns the probe calls per path since the last call, and
// resets them.
func (p *probes) takeCalls() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.calls
	p.calls = map[string]int{}
	return c
}

func (p *probes) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
}
