package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/reconcile/watch"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/connect"
)

// The values of `opctl watch --source`.
const (
	WatchSourceAuto   = "auto"
	WatchSourceBinlog = "binlog"
	WatchSourcePoll   = "poll"
)

// watchSource chooses, per server, how the watch learns of changes
// (docs/watch.md#sources): the binlog when the server has a ROW binlog the
// account can follow (--source auto or binlog), else keyset polling
// (--source auto or poll); it says on stderr which and why. Pipelines on
// several servers get one source per server (a watch.MultiSource). The
// returned func closes the followers.
func watchSource(ctx context.Context, opts *WatchOptions, pipelines []*config.Pipeline, walkers func(*config.Pipeline) watch.Walker) (watch.ChangeSource, func(), error) {
	errOut := opts.IO.ErrOut
	// The topic maps the changes that name no operation (SKIPPED records
	// without biz_id, binlog steps' rows), polled or followed; one index
	// for every part, each record read once.
	var topics *watch.Topics
	kafkaMissing := "no kafka.brokers"
	var c *connect.Clients
	if opts.Clients != nil {
		var err error
		if c, err = opts.Clients(); err != nil {
			return nil, nil, err
		}
		if c.Kafka != nil {
			// The batches search the same windows again every few
			// hundred ms: keep what they read (32 MiB; docs/watch.md#how-it-works).
			c.Kafka.CacheSearches(0)
		}
		if rr, ok := any(c.Kafka).(sources.RecordReader); ok && c.Kafka != nil {
			topics = &watch.Topics{Kafka: rr, SearchWindow: opts.SearchWindow}
		}
		if c.KafkaMissing != "" {
			kafkaMissing = c.KafkaMissing
		}
	}
	poll := func(ps []*config.Pipeline, why string) watch.ChangeSource {
		s := &watch.PollSource{Pipelines: ps, DBFor: walkers, Lookback: opts.OlderThan, Topics: topics,
			Log: func(format string, a ...any) { fmt.Fprintf(opts.IO.ErrOut, "watch: poll: "+format+"\n", a...) }}
		for _, p := range ps {
			fmt.Fprintf(errOut, "watch: pipeline %s: polling every %s: %s\n", p.Name, (&durationFlag{d: opts.Interval}).String(), why)
		}
		for _, name := range s.RecordsUnmapped() {
			fmt.Fprintf(errOut, "watch: pipeline %s: Kafka cannot be read (%s): its SKIPPED records (no biz_id column) are not polled, only their messages name their operations: the --older-than timer and the next sweep see them (docs/watch.md#polling)\n", name, kafkaMissing)
		}
		for _, name := range s.Unfollowed() {
			fmt.Fprintf(errOut, "watch: pipeline %s: polling reads none of its tables (no state table with updated_at, no idempotency table with created_at and biz_id or Kafka to map its records, no entity table with updated_at): only the first sweep and --older-than's timer see it; restart the watch to sweep again (docs/watch.md#polling)\n", name)
		}
		return s
	}
	if opts.Source == WatchSourcePoll {
		return poll(pipelines, "--source poll"), func() {}, nil
	}
	if c == nil {
		return nil, nil, errors.New("watch: no clients to read the binlog with")
	}
	host, _ := os.Hostname()
	servers, err := c.WatchServers(pipelines, host+"\x00"+opts.State)
	if err != nil {
		return nil, nil, err
	}
	notify := make(chan struct{}, 1)
	multi := &watch.MultiSource{Parts: map[string]watch.ChangeSource{}, Notify: notify}
	var closers []func()
	closeAll := func() {
		for _, f := range closers {
			f()
		}
	}
	for _, ws := range servers {
		names := make([]string, len(ws.Pipelines))
		for i, p := range ws.Pipelines {
			names[i] = p.Name
		}
		head, err := ws.Probe(ctx)
		if err != nil {
			if ctx.Err() != nil {
				closeAll()
				return nil, nil, ctx.Err()
			}
			if opts.Source == WatchSourceBinlog {
				closeAll()
				return nil, nil, fmt.Errorf("--source binlog: pipelines %s: %w (docs/watch.md#what-the-binlog-follower-needs; --source auto polls such a server)", strings.Join(names, ", "), err)
			}
			multi.Parts[ws.Label] = poll(ws.Pipelines, "no binlog to follow: "+err.Error())
			multi.Labels = append(multi.Labels, ws.Label)
			continue
		}
		// The zone of the tables' DATETIMEs: a row's time column refines
		// its commit's whole second (docs/watch.md#binlog-mode).
		tz, _ := config.ParseTimeZone(c.Config.MySQLFor(ws.Pipelines[0]).TimeZone)
		bs := &watch.BinlogSource{Pipelines: ws.Pipelines, Follower: ws.Follower, Schema: ws.Schema, Topics: topics, Notify: notify, Location: tz.Loc,
			// opts.IO.ErrOut when it is said: the worker's lock is around it by then.
			Log: func(format string, a ...any) { fmt.Fprintf(opts.IO.ErrOut, "watch: binlog: "+format+"\n", a...) }}
		closers = append(closers, bs.Close)
		var tables []string
		for _, t := range bs.Tables() {
			tables = append(tables, t.Schema+"."+t.Table)
		}
		for _, n := range names {
			fmt.Fprintf(errOut, "watch: pipeline %s: binlog mode (server %s, binlog head %s)\n", n, ws.Label, head)
		}
		fmt.Fprintf(errOut, "watch: binlog of %s: server_id %d, following %d tables: %s\n", ws.Label, ws.ServerID, len(tables), strings.Join(tables, ", "))
		if topics == nil && needsTopic(ws.Pipelines) {
			fmt.Fprintf(errOut, "watch: binlog: Kafka cannot be read (%s): changes that name no operation (records without biz_id, binlog steps without a transaction tie) are left to the timer and the next sweep\n", c.KafkaMissing)
		}
		multi.Parts[ws.Label] = bs
		multi.Labels = append(multi.Labels, ws.Label)
	}
	if len(multi.Labels) == 1 {
		return multi.Parts[multi.Labels[0]], closeAll, nil
	}
	return multi, closeAll, nil
}

// needsTopic reports whether a pipeline has tables whose changes only a
// message maps to operations.
func needsTopic(ps []*config.Pipeline) bool {
	for _, p := range ps {
		if id := p.Idempotency; id != nil && id.Table != "" && id.BizID == "" {
			return true
		}
		for _, s := range p.Steps {
			if s.Binlog != nil {
				return true
			}
		}
	}
	return false
}

// reportBehind feeds opctl_watch_binlog_behind_seconds from the binlog
// parts of source: the furthest behind of them.
func reportBehind(source watch.ChangeSource, set func(time.Duration)) {
	var parts []*watch.BinlogSource
	switch s := source.(type) {
	case *watch.BinlogSource:
		parts = append(parts, s)
	case *watch.MultiSource:
		for _, l := range s.Labels {
			if b, ok := s.Parts[l].(*watch.BinlogSource); ok {
				parts = append(parts, b)
			}
		}
	}
	var mu sync.Mutex
	behind := make([]time.Duration, len(parts))
	for i, b := range parts {
		b.Behind = func(d time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			behind[i] = d
			set(slices.Max(behind))
		}
	}
}
