package cmd

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/connect"
)

// Format is an output format (-o): table, wide, json or jsonl.
type Format string

// Output formats.
const (
	FormatTable Format = "table"
	// FormatWide is table with every value whole on a terminal too.
	FormatWide  Format = "wide"
	FormatJSON  Format = "json"
	FormatJSONL Format = "jsonl"
	// FormatPrometheus is reconcile's text exposition format.
	FormatPrometheus Format = "prometheus"
)

// GlobalOptions are the flags every command accepts.
type GlobalOptions struct {
	ConfigPath string
	MySQLDSN   string
	Brokers    []string
	Output     Format
	NoColor    bool
	Timeout    time.Duration
	// SearchWindow and SearchLimit bound the message search; the flags of
	// where and repair plan set them (zero elsewhere: the Collector's
	// defaults, docs/where.md).
	SearchWindow time.Duration
	SearchLimit  int
}

// connectOptions are the options every client is opened with: all of them
// come from the flags, parsed before the first constructor runs.
func (g GlobalOptions) connectOptions() connect.Options {
	return connect.Options{Timeout: g.Timeout, SearchWindow: g.SearchWindow, SearchLimit: g.SearchLimit}
}

// Factory builds what commands need, lazily and once: the streams, the
// config (with the flag overrides applied), the clients and the repair
// service. Commands take their dependencies from it as functions in their
// Options (so a test passes fakes), never from globals.
type Factory struct {
	IOStreams *iostreams.IOStreams
	Version   string
	Globals   GlobalOptions

	mu      sync.Mutex
	cfg     *config.Config
	cfgErr  error
	clients *connect.Clients
	svc     *repair.Service
	triage  *triage.Service
}

// NewFactory returns a factory on the given streams.
func NewFactory(io *iostreams.IOStreams, version string) *Factory {
	return &Factory{IOStreams: io, Version: version, Globals: GlobalOptions{Output: FormatTable}}
}

// Config loads opctl.yaml once (lookup order of docs/config.md) and applies
// the --mysql-dsn and --brokers overrides.
func (f *Factory) Config() (*config.Config, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.config()
}

func (f *Factory) config() (*config.Config, error) {
	if f.cfg != nil || f.cfgErr != nil {
		return f.cfg, f.cfgErr
	}
	// Load looks the file up itself (config.Find).
	cfg, err := config.Load(f.Globals.ConfigPath)
	if err != nil {
		f.cfgErr = err
		return nil, err
	}
	f.cfg = cfg
	if f.Globals.MySQLDSN != "" {
		f.cfg.MySQL.DSN = f.Globals.MySQLDSN
	}
	if len(f.Globals.Brokers) > 0 {
		f.cfg.Kafka.Brokers = f.Globals.Brokers
	}
	return f.cfg, nil
}

// Clients opens the sources of the config once, with the options of the
// parsed flags (Globals: --timeout, the message search bounds;
// connect.Open defaults what they leave zero); later calls return the same
// clients. It takes no options: the flags decide them before any command
// runs, never the first caller.
func (f *Factory) Clients() (*connect.Clients, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.clients != nil {
		return f.clients, nil
	}
	cfg, err := f.config()
	if err != nil {
		return nil, err
	}
	c, err := connect.Open(cfg, f.Globals.connectOptions())
	if err != nil {
		return nil, err
	}
	f.clients = c
	return c, nil
}

// Triage is the read side on the clients (see Clients): the triage of
// `opctl where`, the console and the runbooks.
func (f *Factory) Triage() (*triage.Service, error) {
	c, err := f.Clients()
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.triage == nil {
		f.triage = c.Triage()
	}
	return f.triage, nil
}

// Service is the repair service (the write side) on the clients (see
// Clients).
func (f *Factory) Service() (*repair.Service, error) {
	tr, err := f.Triage()
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.svc == nil {
		f.svc = NewRepairService(f.clients, tr)
	}
	return f.svc, nil
}

// Reconcile is reconcile.Run on the clients (see Clients), each pipeline
// read on its own server (pipelines[].mysql): opctl reconcile, the runbook
// runner and the console.
func (f *Factory) Reconcile() (reconcile.Func, error) {
	c, err := f.Clients()
	if err != nil {
		return nil, err
	}
	d := reconcile.Deps{DB: c.Reader, Collector: c.Collector,
		DBFor: func(p *config.Pipeline) reconcile.DB { return c.ReaderFor(p) }}
	return func(ctx context.Context, o reconcile.Options, emit func(reconcile.Result) error) (*reconcile.Summary, error) {
		return reconcile.Run(ctx, d, o, emit)
	}, nil
}

// NewRepairService wires the repair service on the clients of one
// configuration and its read side: the write path opened on first use,
// the audit readers of every server, Kafka when a broker is configured.
func NewRepairService(c *connect.Clients, tr *triage.Service) *repair.Service {
	s := &repair.Service{Config: c.Config, Triage: tr, Collector: c.Collector, Prober: c.Prober, Poster: c.Prober, AuditLog: c.Reader, Timeout: c.Timeout,
		Store:    func() (sources.Store, error) { return c.Writer() },
		StoreFor: func(p *config.Pipeline) (sources.Store, error) { return c.WriterFor(p) }}
	for _, r := range c.Readers()[1:] {
		s.MoreAudit = append(s.MoreAudit, r)
	}
	if c.Kafka != nil {
		s.Kafka = c.Kafka
	}
	return s
}

// Close releases every client the factory opened.
func (f *Factory) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	if f.svc != nil {
		errs = append(errs, f.svc.Close())
	}
	if f.clients != nil {
		errs = append(errs, f.clients.Close())
	}
	f.svc, f.triage, f.clients = nil, nil, nil
	return errors.Join(errs...)
}
