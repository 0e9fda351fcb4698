// Package connect opens the sources a configuration names, in one place:
// the MySQL read path, the Kafka client (or why there is none), the HTTP
// probe client, the Collector that `opctl where` and every other triage
// reads with, and, on first use, the MySQL write path of repairs. cmd, the
// lab and the tests build their clients here, never by hand.
package connect

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/sources"
	binlogsrc "github.com/opctl-dev/opctl/sources/binlog"
	"github.com/opctl-dev/opctl/sources/config"
	kafkasrc "github.com/opctl-dev/opctl/sources/kafka"
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
	"github.com/opctl-dev/opctl/sources/probe"
)

// Options bound what the clients may wait for and read.
type Options struct {
	// Timeout bounds each source (--timeout); zero is
	// sources.DefaultTimeout, defaulted here only (docs/README.md).
	Timeout time.Duration
	// SearchWindow and SearchLimit bound the message search; zero leaves
	// the Collector's defaults, sources.DefaultSearchWindow and
	// sources.DefaultSearchLimit (docs/where.md).
	SearchWindow time.Duration
	SearchLimit  int
}

// Clients are the open sources of one configuration. Close them when done.
type Clients struct {
	Config *config.Config
	// Reader is the MySQL read path (mysql.dsn).
	Reader *mysqlsrc.Reader
	// Kafka is nil when no broker is configured; KafkaMissing says why.
	Kafka        *kafkasrc.Reader
	KafkaMissing string
	Prober       *probe.Client
	// Collector reads one operation (or a batch) from all of the above.
	Collector *sources.Collector
	Timeout   time.Duration

	mu     sync.Mutex
	writer *mysqlsrc.Writer
	// routes are the clients of the pipelines with their own mysql block
	// (pipelines[].mysql), by pipeline name; writers their write paths,
	// by DSN and time zone.
	routes  map[string]*route
	writers map[string]*mysqlsrc.Writer
}

// route is the read path and binlog reader of one pipeline with its own
// mysql block.
type route struct {
	m      config.MySQL
	reader *mysqlsrc.Reader
	binlog *binlogsrc.Reader
}

// Open validates the MySQL and Kafka settings of cfg and opens the read
// clients (a pool does not connect until it is used: an unreachable server
// is reported by the first read). A DSN or a broker address opctl cannot
// use is a config.ErrorList with every problem (docs/config.md). No broker
// is not an error: the verdicts are then computed without Kafka and marked
// partial.
func Open(cfg *config.Config, o Options) (*Clients, error) {
	if o.Timeout <= 0 {
		o.Timeout = sources.DefaultTimeout
	}
	// Every check before anything is opened: a broken address, DSN or
	// credential is a configuration error (exit 1) with its fix, never a
	// partial verdict or a driver's message.
	checks := []error{cfg.ValidateMySQL(mysqlsrc.CheckDSN)}
	kafkaOff := noBrokers(cfg.Kafka.Brokers)
	if !kafkaOff {
		checks = append(checks, cfg.ValidateKafka())
	}
	var problems config.ErrorList
	for _, err := range checks {
		var l config.ErrorList
		if errors.As(err, &l) {
			problems = append(problems, l...)
		} else if err != nil {
			return nil, err
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	r, err := mysqlsrc.OpenWith(cfg.MySQL.DSN, mysqlsrc.Options{Timeout: o.Timeout, TimeZone: cfg.MySQL.TimeZone})
	if err != nil {
		return nil, err
	}
	c := &Clients{Config: cfg, Reader: r, Prober: probe.New(o.Timeout), Timeout: o.Timeout}
	if kafkaOff {
		c.KafkaMissing = "not configured: kafka.brokers is empty (set it in opctl.yaml or pass --brokers)"
	} else {
		c.Kafka = kafkasrc.New(cfg.Kafka, o.Timeout)
	}
	c.Collector = &sources.Collector{DB: r, Prober: c.Prober, AuditTable: cfg.Audit.AuditTable(),
		Timeout: o.Timeout, SearchWindow: o.SearchWindow, SearchLimit: o.SearchLimit, KafkaMissing: c.KafkaMissing}
	if c.Kafka != nil {
		c.Collector.Kafka = c.Kafka
	}
	if usesBinlog(cfg) {
		b, err := binlogsrc.New(cfg.MySQL.EffectiveBinlogDSN(), cfg.MySQL.ServerID, o.Timeout)
		if err != nil {
			r.Close()
			return nil, err
		}
		c.Collector.Binlog, c.Collector.BinlogSchema = b, b.Database()
	}
	if err := c.openRoutes(o); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// openRoutes opens the read path (and binlog reader) of every pipeline
// whose mysql block gives it a server of its own; pipelines that share a
// DSN and time zone share one pool.
func (c *Clients) openRoutes(o Options) error {
	cfg := c.Config
	byDSN := map[string]*mysqlsrc.Reader{}
	for i := range cfg.Pipelines {
		p := &cfg.Pipelines[i]
		if p.MySQL == nil {
			continue
		}
		m := cfg.MySQLFor(p)
		rt := &route{m: m}
		if m.DSN == cfg.MySQL.DSN && m.TimeZone == cfg.MySQL.TimeZone {
			rt.reader = c.Reader
		} else if r := byDSN[m.DSN+"\x00"+m.TimeZone]; r != nil {
			rt.reader = r
		} else {
			r, err := mysqlsrc.OpenWith(m.DSN, mysqlsrc.Options{Timeout: o.Timeout, TimeZone: m.TimeZone})
			if err != nil {
				return fmt.Errorf("pipeline %s: %w", p.Name, err)
			}
			byDSN[m.DSN+"\x00"+m.TimeZone], rt.reader = r, r
		}
		if p.UsesBinlog() {
			b, err := binlogsrc.New(m.EffectiveBinlogDSN(), m.ServerID, o.Timeout)
			if err != nil {
				return fmt.Errorf("pipeline %s: %w", p.Name, err)
			}
			rt.binlog = b
		}
		if c.routes == nil {
			c.routes = map[string]*route{}
		}
		c.routes[p.Name] = rt
	}
	if c.routes != nil {
		c.Collector.Route = func(p *config.Pipeline) sources.Route {
			rt := c.routes[p.Name]
			if rt == nil {
				return sources.Route{}
			}
			out := sources.Route{DB: rt.reader}
			if rt.binlog != nil {
				out.Binlog, out.BinlogSchema = rt.binlog, rt.binlog.Database()
			}
			return out
		}
	}
	return nil
}

// ReaderFor is the read path of pipeline p: its own (pipelines[].mysql)
// or the top-level one.
func (c *Clients) ReaderFor(p *config.Pipeline) *mysqlsrc.Reader {
	if p != nil {
		if rt := c.routes[p.Name]; rt != nil {
			return rt.reader
		}
	}
	return c.Reader
}

// Readers are every distinct read path, the top-level one first: where
// opctl's audit rows of the pipelines may be.
func (c *Clients) Readers() []*mysqlsrc.Reader {
	out := []*mysqlsrc.Reader{c.Reader}
	for i := range c.Config.Pipelines {
		if r := c.ReaderFor(&c.Config.Pipelines[i]); !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// WriterFor opens the write path of pipeline p on first use: its own
// mysql block's write_dsn (default its dsn), or the top-level one.
func (c *Clients) WriterFor(p *config.Pipeline) (*mysqlsrc.Writer, error) {
	rt := (*route)(nil)
	if p != nil {
		rt = c.routes[p.Name]
	}
	if rt == nil {
		return c.Writer()
	}
	m := rt.m
	key := m.EffectiveWriteDSN() + "\x00" + m.TimeZone
	if m.EffectiveWriteDSN() == c.Config.MySQL.EffectiveWriteDSN() && m.TimeZone == c.Config.MySQL.TimeZone {
		return c.Writer()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.writers[key]; w != nil {
		return w, nil
	}
	w, err := mysqlsrc.OpenWriterWith(m.EffectiveWriteDSN(), mysqlsrc.Options{Timeout: c.Timeout, TimeZone: m.TimeZone})
	if err != nil {
		return nil, fmt.Errorf("pipeline %s: %w", p.Name, err)
	}
	if c.writers == nil {
		c.writers = map[string]*mysqlsrc.Writer{}
	}
	c.writers[key] = w
	return w, nil
}

// Triage is the read side on these clients: the triage of `opctl where`,
// the console and the runbooks (inspect/triage), which links no driver.
func (c *Clients) Triage() *triage.Service {
	t := &triage.Service{Config: c.Config, Collector: c.Collector}
	if c.Kafka != nil {
		t.Partitions = c.Kafka
	}
	return t
}

// usesBinlog reports whether a step of cfg reads its evidence from the
// binlog.
func usesBinlog(cfg *config.Config) bool {
	for i := range cfg.Pipelines {
		if cfg.Pipelines[i].UsesBinlog() {
			return true
		}
	}
	return false
}

func noBrokers(b []string) bool {
	return len(b) == 0 || (len(b) == 1 && strings.TrimSpace(b[0]) == "")
}

// Writer opens the write path (mysql.write_dsn, default mysql.dsn) on first
// use and returns the same one afterwards.
func (c *Clients) Writer() (*mysqlsrc.Writer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writer != nil {
		return c.writer, nil
	}
	w, err := OpenWriter(c.Config, c.Timeout)
	if err != nil {
		return nil, err
	}
	c.writer = w
	return w, nil
}

// OpenWriter validates the MySQL settings of cfg and opens its write path
// (mysql.write_dsn, default mysql.dsn; docs/config.md). timeout bounds dial,
// read and write when the DSN sets none; zero sets none (DDL on a large
// table, `opctl schema apply`). Close it when done.
func OpenWriter(cfg *config.Config, timeout time.Duration) (*mysqlsrc.Writer, error) {
	if err := cfg.ValidateMySQL(mysqlsrc.CheckDSN); err != nil {
		return nil, err
	}
	return mysqlsrc.OpenWriterWith(cfg.MySQL.EffectiveWriteDSN(), mysqlsrc.Options{Timeout: timeout, TimeZone: cfg.MySQL.TimeZone})
}

// Close closes every client.
func (c *Clients) Close() error {
	c.mu.Lock()
	w, ws := c.writer, c.writers
	c.writer, c.writers = nil, nil
	c.mu.Unlock()
	var errs []error
	if w != nil {
		errs = append(errs, w.Close())
	}
	for _, w := range ws {
		errs = append(errs, w.Close())
	}
	if c.Kafka != nil {
		errs = append(errs, c.Kafka.Close())
	}
	for _, r := range c.Readers() {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}
