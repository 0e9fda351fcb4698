// Package connect opens the sources a configuration names, in one place:
// the MySQL read path, the Kafka client (or why there is none), the HTTP
// probe client, the Collector that `opctl where` and every other triage
// reads with, and, on first use, the MySQL write path of repairs. cmd, the
// lab and the tests build their clients here, never by hand.
package connect

import (
	"errors"
	"strings"
	"sync"
	"time"

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
	checks := []error{cfg.ValidateMySQL()}
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
	return c, nil
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
	if err := cfg.ValidateMySQL(); err != nil {
		return nil, err
	}
	return mysqlsrc.OpenWriterWith(cfg.MySQL.EffectiveWriteDSN(), mysqlsrc.Options{Timeout: timeout, TimeZone: cfg.MySQL.TimeZone})
}

// Close closes every client.
func (c *Clients) Close() error {
	c.mu.Lock()
	w := c.writer
	c.writer = nil
	c.mu.Unlock()
	var errs []error
	if w != nil {
		errs = append(errs, w.Close())
	}
	if c.Kafka != nil {
		errs = append(errs, c.Kafka.Close())
	}
	errs = append(errs, c.Reader.Close())
	return errors.Join(errs...)
}
