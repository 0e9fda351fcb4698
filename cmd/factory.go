package cmd

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	kafkasrc "github.com/opctl-dev/opctl/sources/kafka"
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
	"github.com/opctl-dev/opctl/sources/probe"
)

// GlobalOptions are the flags every command accepts (SPEC §5).
type GlobalOptions struct {
	ConfigPath string
	MySQLDSN   string
	Brokers    []string
	Output     string
	NoColor    bool
	Timeout    time.Duration
}

// Factory builds what commands need, lazily and once: the streams, the
// config (with flag overrides applied) and the source clients. It is small
// on purpose: commands get their dependencies from it, never from globals.
type Factory struct {
	IOStreams *iostreams.IOStreams
	Version   string
	Globals   GlobalOptions

	mu      sync.Mutex
	cfg     *config.Config
	cfgErr  error
	closers []func() error
}

// NewFactory returns a factory on the given streams.
func NewFactory(io *iostreams.IOStreams, version string) *Factory {
	return &Factory{IOStreams: io, Version: version, Globals: GlobalOptions{Output: "table", Timeout: 10 * time.Second}}
}

// Config loads opctl.yaml once (lookup order of SPEC §4) and applies the
// --mysql-dsn and --brokers overrides.
func (f *Factory) Config() (*config.Config, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cfg != nil || f.cfgErr != nil {
		return f.cfg, f.cfgErr
	}
	path, err := config.Find(f.Globals.ConfigPath)
	if err != nil {
		f.cfgErr = err
		return nil, err
	}
	cfg, err := config.Load(path)
	if err != nil {
		f.cfgErr = err
		return nil, err
	}
	if f.Globals.MySQLDSN != "" {
		cfg.MySQL.DSN = f.Globals.MySQLDSN
	}
	if len(f.Globals.Brokers) > 0 {
		cfg.Kafka.Brokers = f.Globals.Brokers
	}
	f.cfg = cfg
	return cfg, nil
}

// MySQL opens the read path (mysql.dsn). The caller must not close it: the
// factory closes everything in Close.
func (f *Factory) MySQL(cfg *config.Config) (*mysqlsrc.Reader, error) {
	if err := cfg.ValidateMySQL(); err != nil {
		return nil, err
	}
	r, err := mysqlsrc.Open(cfg.MySQL.DSN, f.Globals.Timeout)
	if err != nil {
		return nil, err
	}
	f.onClose(r.Close)
	return r, nil
}

// Kafka returns the Kafka reader, or nil and why when no broker is
// configured (the verdict is then computed without Kafka, marked partial).
func (f *Factory) Kafka(cfg *config.Config) (*kafkasrc.Reader, string) {
	if len(cfg.Kafka.Brokers) == 0 || (len(cfg.Kafka.Brokers) == 1 && strings.TrimSpace(cfg.Kafka.Brokers[0]) == "") {
		return nil, "not configured: kafka.brokers is empty (set it in opctl.yaml or pass --brokers)"
	}
	if err := cfg.ValidateKafka(); err != nil {
		return nil, err.Error()
	}
	r := kafkasrc.New(cfg.Kafka, f.Globals.Timeout)
	f.onClose(r.Close)
	return r, ""
}

// Prober returns the HTTP probe client.
func (f *Factory) Prober() sources.Prober { return probe.New(f.Globals.Timeout) }

// Collector assembles a sources.Collector from the config.
func (f *Factory) Collector(cfg *config.Config, window time.Duration, limit int) (*sources.Collector, error) {
	db, err := f.MySQL(cfg)
	if err != nil {
		return nil, err
	}
	c := &sources.Collector{DB: db, Prober: f.Prober(), AuditTable: cfg.Audit.AuditTable(),
		Timeout: f.Globals.Timeout, SearchWindow: window, SearchLimit: limit}
	if k, why := f.Kafka(cfg); k != nil {
		c.Kafka = k
	} else {
		c.KafkaMissing = why
	}
	return c, nil
}

func (f *Factory) onClose(fn func() error) {
	f.mu.Lock()
	f.closers = append(f.closers, fn)
	f.mu.Unlock()
}

// Close releases every client the factory opened.
func (f *Factory) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []string
	for i := len(f.closers) - 1; i >= 0; i-- {
		if err := f.closers[i](); err != nil {
			errs = append(errs, err.Error())
		}
	}
	f.closers = nil
	if len(errs) > 0 {
		return fmt.Errorf("close: %s", strings.Join(errs, "; "))
	}
	return nil
}
