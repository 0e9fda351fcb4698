package reconcile

import (
	"context"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/sources"
)

type groupResult struct {
	view sources.GroupView
	err  error
}

// cachedKafka answers the Collector from the group views read once at the
// start of a run (docs/reconcile.md: Kafka is read once per partition for a whole
// run, never per candidate). Locate does no I/O: it reports the position
// the state row stores, or unknown.
type cachedKafka struct {
	mu    sync.Mutex
	views map[string]groupResult
	// rr reads the topic over a time window (nil: the Collector's Kafka
	// cannot): the triage of a binlog step whose window holds a change no
	// transaction ties reads it to find the other operations that may own
	// it (docs/where.md#binlog-evidence).
	rr sources.RecordReader
}

// Records implements sources.RecordReader through the Collector's Kafka;
// without one it is an error (the search is then said to be incomplete).
func (k *cachedKafka) Records(ctx context.Context, topic string, from, to time.Time, limit int, each func(*sources.Message)) (sources.RecordsRead, error) {
	if k.rr == nil {
		return sources.RecordsRead{}, errNoRange
	}
	return k.rr.Records(ctx, topic, from, to, limit, each)
}

func groupKey(topic, group string) string { return topic + "\x00" + group }

// Group implements sources.Kafka from the cache.
func (k *cachedKafka) Group(_ context.Context, topic, group string) (sources.GroupView, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	g, ok := k.views[groupKey(topic, group)]
	if !ok {
		return sources.GroupView{}, errNoView
	}
	return g.view, g.err
}

// Locate implements sources.Kafka without reading the log.
func (k *cachedKafka) Locate(_ context.Context, req sources.LocateRequest) (sources.Location, error) {
	if req.Partition >= 0 && req.Offset >= 0 {
		return sources.Location{Partition: req.Partition, Offset: req.Offset, Located: sources.LocatedStored,
			Detail: "stored position (reconcile does not read the record)"}, nil
	}
	return sources.Location{Partition: -1, Offset: -1, Located: sources.LocatedUnknown,
		Detail: "no stored partition/offset; reconcile does not search the log"}, nil
}

type viewError string

func (e viewError) Error() string { return string(e) }

const errNoView = viewError("reconcile: group view not read")

const errNoRange = viewError("reconcile: this Kafka reader cannot read the topic over a time range")

// readGroups reads the group view of every selected pipeline, once.
func (r *run) readGroups() {
	for _, p := range r.o.Pipelines {
		key := groupKey(p.Topic, p.Group)
		if _, ok := r.kafka.views[key]; ok {
			continue
		}
		v, err := r.d.Collector.Kafka.Group(r.qctx, p.Topic, p.Group)
		r.kafka.views[key] = groupResult{view: v, err: err}
	}
}

// group returns the view of p's group, and its error.
func (r *run) group(topic, group string) (sources.GroupView, error) {
	return r.kafka.Group(r.qctx, topic, group)
}
