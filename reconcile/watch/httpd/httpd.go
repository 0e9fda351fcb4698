// Package httpd is opctl watch's HTTP side (docs/watch.md#endpoints):
// /metrics from a client_golang registry of its own (never the global
// default), /targets, /healthz and /readyz over a watch.Watcher.
package httpd

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"

	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/opctl-dev/opctl/reconcile/watch"
)

// Metrics are the watch's metrics on their own registry.
type Metrics struct {
	Registry      *prometheus.Registry
	latency       prometheus.Histogram
	binlogBehind  prometheus.Gauge
	rowsRead      *prometheus.CounterVec
	triages       *prometheus.CounterVec
	secondLooks   *prometheus.CounterVec
	repairs       *prometheus.CounterVec
	up            *prometheus.GaugeVec
	targets       func() []watch.Flag
	now           func() time.Time
	targetsDesc   *prometheus.Desc
	oldestAgeDesc *prometheus.Desc
}

// NewMetrics registers every metric of docs/watch.md#metrics; targets is
// read at each scrape (the flagged set), now is the clock (nil: time.Now).
func NewMetrics(targets func() []watch.Flag, now func() time.Time) *Metrics {
	if now == nil {
		now = time.Now
	}
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "opctl_watch_detection_latency_seconds",
			Help:    "From the commit time of the row change that made an operation a target to its flagged line.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300}}),
		binlogBehind: prometheus.NewGauge(prometheus.GaugeOpts{Name: "opctl_watch_binlog_behind_seconds",
			Help: "How far the binlog follower is behind the newest commit (0 while polling: no binlog is followed)."}),
		rowsRead: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "opctl_watch_rows_read_total",
			Help: "Rows read by the watch's change sources."}, []string{"source"}),
		triages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "opctl_watch_triages_total",
			Help: "Operations triaged, by result (ok, error)."}, []string{"result"}),
		secondLooks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "opctl_watch_binlog_second_looks_total",
			Help: "Binlog looks (an operation's changes of one read) whose triage found no target, by result: looked (triaged again 500 ms later) or fenced (the fence read proved the triage saw the change: no second look)."}, []string{"result"}),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "opctl_watch_repairs_total",
			Help: "Repairs tried by the recovery worker (--repair), by the plan's verdict and outcome (repaired, failed, unexpected, skipped)."}, []string{"verdict", "outcome"}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "opctl_watch_up",
			Help: "1 when the source answers, 0 when it does not."}, []string{"source"}),
		targets: targets, now: now,
		targetsDesc: prometheus.NewDesc("opctl_watch_targets", "Operations flagged now, by pipeline and verdict.",
			[]string{"pipeline", "verdict"}, nil),
		oldestAgeDesc: prometheus.NewDesc("opctl_watch_target_oldest_age_seconds", "Age of the oldest flag, by pipeline and verdict.",
			[]string{"pipeline", "verdict"}, nil),
	}
	m.Registry.MustRegister(m.latency, m.binlogBehind, m.rowsRead, m.triages, m.secondLooks, m.repairs, m.up, targetsCollector{m})
	// Both series from the start: a rate of either is defined before the
	// first binlog look (0 while polling).
	for _, r := range []string{watch.SecondLookLooked, watch.SecondLookFenced} {
		m.secondLooks.WithLabelValues(r)
	}
	return m
}

// Hooks are the watch.Hooks that feed these metrics.
func (m *Metrics) Hooks() watch.Hooks {
	return watch.Hooks{
		Event: func(e watch.Event) {
			if e.Event == watch.Flagged && e.LatencyMS != nil {
				m.latency.Observe(float64(*e.LatencyMS) / 1000)
			}
		},
		RowsRead:   func(source string, n int) { m.rowsRead.WithLabelValues(source).Add(float64(n)) },
		Triaged:    func(result string) { m.triages.WithLabelValues(result).Inc() },
		SecondLook: func(result string) { m.secondLooks.WithLabelValues(result).Inc() },
		Up: func(source string, up bool) {
			v := 0.0
			if up {
				v = 1
			}
			m.up.WithLabelValues(source).Set(v)
		},
	}
}

// BinlogBehind sets opctl_watch_binlog_behind_seconds: how far the
// binlog follower is behind the server (0 when it has read everything).
func (m *Metrics) BinlogBehind(d time.Duration) { m.binlogBehind.Set(max(0, d.Seconds())) }

// Repaired counts one repair of the recovery worker
// (opctl_watch_repairs_total).
func (m *Metrics) Repaired(verdict, outcome string) {
	m.repairs.WithLabelValues(verdict, outcome).Inc()
}

// RepairState registers the recovery worker's state gauges (only a watch
// with --repair has them): opctl_watch_repair_state{state}, 1 for the
// worker's state and 0 for the others, and
// opctl_watch_repairs_stopped{reason}, 1 for the reason it stopped; every
// series starts at 0. It returns the function that sets them (the
// worker's State hook).
func (m *Metrics) RepairState(states, reasons []string) func(state, reason string) {
	st := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "opctl_watch_repair_state",
		Help: "1 for the recovery worker's state (standby: another watch holds the repair lock; repairing; paused: the pause file exists; stopped: a repair failed), 0 for the others."}, []string{"state"})
	stopped := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "opctl_watch_repairs_stopped",
		Help: "1 when the recovery worker stopped repairing, by reason (apply_failed, unexpected_verdict); restart the watch to repair again."}, []string{"reason"})
	m.Registry.MustRegister(st, stopped)
	for _, s := range states {
		st.WithLabelValues(s).Set(0)
	}
	for _, r := range reasons {
		stopped.WithLabelValues(r).Set(0)
	}
	return func(state, reason string) {
		for _, s := range states {
			v := 0.0
			if s == state {
				v = 1
			}
			st.WithLabelValues(s).Set(v)
		}
		if reason != "" {
			stopped.WithLabelValues(reason).Set(1)
		}
	}
}

// targetsCollector computes the targets gauges from the flagged set at
// each scrape.
type targetsCollector struct{ m *Metrics }

func (c targetsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.m.targetsDesc
	ch <- c.m.oldestAgeDesc
}

func (c targetsCollector) Collect(ch chan<- prometheus.Metric) {
	type lv struct{ p, v string }
	count := map[lv]int{}
	oldest := map[lv]time.Time{}
	for _, f := range c.m.targets() {
		k := lv{f.Pipeline, f.Verdict}
		count[k]++
		if o, ok := oldest[k]; !ok || f.Since.Before(o) {
			oldest[k] = f.Since
		}
	}
	now := c.m.now()
	for k, n := range count {
		ch <- prometheus.MustNewConstMetric(c.m.targetsDesc, prometheus.GaugeValue, float64(n), k.p, k.v)
		ch <- prometheus.MustNewConstMetric(c.m.oldestAgeDesc, prometheus.GaugeValue, now.Sub(oldest[k]).Seconds(), k.p, k.v)
	}
}

// target is one element of /targets: the fields of the operation's last
// flagged or changed line.
type target = watch.Event

// Handler serves /metrics, /targets, /healthz and /readyz.
func Handler(w *watch.Watcher, m *Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /targets", func(rw http.ResponseWriter, _ *http.Request) {
		flags := w.Targets()
		out := make([]target, len(flags))
		for i, f := range flags {
			out[i] = f.Event
		}
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(out)
	})
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, _ *http.Request) {
		if !w.Ready() {
			// Which source is down, since when and why
			// (docs/watch.md#when-mysql-or-kafka-is-down).
			why := w.NotReady()
			if why == "" {
				why = "the first sweep is not done or a source does not answer"
			}
			http.Error(rw, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		_, _ = rw.Write([]byte("ok\n"))
	})
	return mux
}

// Listen binds addr (so that a port in use is an error before the watch
// starts).
func Listen(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }

// Serve serves h on l until ctx ends, then shuts down within a second.
func Serve(ctx context.Context, l net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_ = srv.Shutdown(sctx)
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}
