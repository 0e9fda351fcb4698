// Package sources holds the plain evidence structs that opctl reads about one
// operation, and the reader interfaces that produce them. Its subpackages
// (sources/mysql, sources/kafka, sources/probe) are the only code that talks
// to MySQL, Kafka or downstream HTTP services; inspect consumes these structs
// and never a driver.
package sources

import (
	"context"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/sources/config"
)

// Defaults of every command and of the lab (docs/config.md): the time each
// source may take, and the bounds of the message search.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultSearchWindow = 5 * time.Minute
	DefaultSearchLimit  = 50000
)

// Source status values reported in Evidence.Sources.
const (
	StatusOK = "ok"
	// StatusSkipped means the source was not needed or not configured.
	StatusSkipped = "skipped"
)

// Value is one column value of an evidence row: nil (SQL NULL), int64,
// float64, string (also DECIMAL and text) or time.Time.
type Value = any

// Row is one result row with its column names kept in query order.
type Row struct {
	Columns []string `json:"-"`
	Values  []Value  `json:"-"`
}

// Truthy reports whether a value reads as true: a non-zero integer, true,
// or the text "1", "true" or "yes" (any case). It is how a `reversed`
// column of an evidence row is read, on the read path and in a repair's
// guards alike.
func Truthy(v Value) bool {
	switch x := v.(type) {
	case int64:
		return x != 0
	case bool:
		return x
	case string:
		return x == "1" || strings.EqualFold(x, "true") || strings.EqualFold(x, "yes")
	case []byte:
		return Truthy(string(x))
	}
	return false
}

// Get returns the value of the named column and whether it exists.
func (r Row) Get(col string) (Value, bool) {
	for i, c := range r.Columns {
		if c == col {
			return r.Values[i], true
		}
	}
	return nil, false
}

// Identity is the row's identity: its first column (docs/repair.md).
func (r Row) Identity() Value {
	if len(r.Values) == 0 {
		return nil
	}
	return r.Values[0]
}

// StateRow is the operation's state-table row.
type StateRow struct {
	Found bool
	// Key is the stored biz_id (the key column) as the database holds it.
	Key        string
	Status     string
	Version    *int64 // nil when not configured or NULL
	Owner      string
	LeaseUntil *time.Time
	Partition  *int32
	Offset     *int64
	MsgID      string
	CreatedAt  *time.Time
	UpdatedAt  *time.Time
}

// LeaseLive says whether the row's lease is held at now, the database's
// clock: an owner, a lease_until after now (docs/verdicts.md "IN_FLIGHT").
// A zero now (the clock was not read) holds no lease.
func (s StateRow) LeaseLive(now time.Time) bool {
	return s.Found && s.Owner != "" && s.LeaseUntil != nil && !now.IsZero() && s.LeaseUntil.After(now)
}

// Intent is one remote-step intent row: written before the call, acked after.
type Intent struct {
	RequestID string
	SentAt    *time.Time
	AckedAt   *time.Time
	Result    string
	// Probe is the downstream's answer for this request id, when probed.
	Probe *ProbeResult
}

// Probe outcomes.
const (
	ProbeApplied      = "applied"
	ProbeAbsent       = "absent"
	ProbeInconclusive = "inconclusive"
)

// ProbeResult is what a downstream said about a call.
type ProbeResult struct {
	// Outcome is applied, absent or inconclusive.
	Outcome string
	// Status is the raw "status" field of the answer, if any.
	Status string
	// Count is the "count" field of a biz_id-keyed probe, nil otherwise.
	Count *int
	// Detail says why an answer was inconclusive (timeout, HTTP 500, ...).
	Detail string
	URL    string
}

// StepEvidence is what was read for one step.
type StepEvidence struct {
	Name string
	// Rows are the evidence rows (local and outbox steps).
	Rows []Row
	// Intents are the intent rows (remote steps).
	Intents []Intent
	// BizProbe is the answer of a probe keyed by {biz_id}, if configured.
	BizProbe *ProbeResult
	// Err is set when this step's query failed ("debit: evidence query:
	// ..."); the step is then unknown and the report partial.
	Err string
	// BinlogErr is set when the step's binlog evidence could not be read
	// ("debit: binlog: ..."): the step is unknown and the report partial
	// (Sources["binlog"] says why). Rows then holds no binlog change.
	BinlogErr string
	// Binlog is how a binlog step's changes were weighed against the
	// other operations that may own them (nil for other steps, and when
	// BinlogErr is set).
	Binlog *BinlogAttribution
}

// IdempotencyRow is one consumer idempotency record.
type IdempotencyRow struct {
	Key    string
	Action string
	// BizID is the record's biz_id as stored.
	BizID     string
	CreatedAt *time.Time
}

// EntityRow is the business entity a skip decision looked at.
type EntityRow struct {
	Found  bool
	Status string
	// At is the entity query's second column when it is a time: it anchors
	// the message search of an operation with no other timestamp.
	At *time.Time
}

// AuditAction is one action of opctl's own audit for the operation.
type AuditAction struct {
	PlanID      string
	ActionIndex int
	Action      string
	Outcome     string // applied | publishing | published
	// Step is the step the action was about, when any.
	Step string
	// ReversedID is the identity of the evidence row a reverse action reversed.
	ReversedID string
	// Partition and Offset locate a published republish.
	Partition *int32
	Offset    *int64
	// Attested is what an applied repair action (manual, advance_state,
	// compensate_remote) attested about Step's effects: a request id, an
	// evidence identity, or "*" for the step as a whole, mapped to applied,
	// absent, compensated or reversed (after_image "attested").
	Attested map[string]string
	// PlanActions is how many actions the row's plan has (0: not recorded,
	// an audit row of an older opctl).
	PlanActions int
	// Deleted is the idempotency record an applied flip_skipped deleted
	// (idempotency.reopen: delete), whole, so that it can be put back.
	Deleted *DeletedRecord
	At      time.Time
	Detail  string
}

// DeletedRecord is an idempotency record opctl deleted, as it was: its
// key, and every column as text (nil for NULL).
type DeletedRecord struct {
	Key     string
	Columns []string
	Values  []*string
}

// DBEvidence is everything read from MySQL for one operation. All of it is
// read concurrently in one round of queries.
type DBEvidence struct {
	// Now is the database clock (SELECT NOW(6)), read with the state row.
	Now         time.Time
	State       StateRow
	Steps       []StepEvidence
	Idempotency []IdempotencyRow
	Entity      *EntityRow
	Audit       []AuditAction
	// Failed lists the operation-level queries (state, idempotency, entity,
	// audit) that failed: what they would have read is missing (the zero
	// value). A step's failed query is in its StepEvidence.Err instead.
	Failed []FailedQuery
	// ActionColumn is the idempotency action column's type as the server
	// declares it ("enum('DONE','SKIPPED')", "varchar(24)"), read for a
	// repair that may reopen a SKIPPED record (Collector.ReadActionColumn);
	// "" when not read.
	ActionColumn string
}

// Operation-level queries of a read, as FailedQuery.Query names them.
const (
	QueryState       = "state"
	QueryIdempotency = "idempotency"
	QueryEntity      = "entity"
	QueryAudit       = "audit"
)

// FailedQuery is one operation-level query of a MySQL read that failed.
type FailedQuery struct {
	// Query is QueryState, QueryIdempotency, QueryEntity or QueryAudit; ""
	// when the reader did not say which (any of them may have failed).
	Query string
	// Err is why, as the reader reported it (never a password).
	Err string
}

// Is reports whether the failure is of query q: a failure the reader did
// not attribute is taken to be of every query.
func (f FailedQuery) Is(q string) bool { return f.Query == q || f.Query == "" }

// String reads like "state query: Error 1054 (42S22): Unknown column ...".
func (f FailedQuery) String() string {
	if f.Query == "" {
		return f.Err
	}
	return f.Query + " query: " + f.Err
}

// Message is a Kafka record as read back.
type Message struct {
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte
	Value     []byte
	Headers   map[string]string
}

// Located says how the message position was obtained.
const (
	LocatedStored      = "stored"
	LocatedSearched    = "searched"
	LocatedRepublished = "republished"
	LocatedUnknown     = "unknown"
)

// PartitionView is the group's and the log's view of one partition.
type PartitionView struct {
	Partition int32
	// Committed is the group's committed offset, -1 when none.
	Committed int64
	LogStart  int64
	LogEnd    int64
	// Owner is the member (client id / member id) assigned this partition, "" if none.
	Owner string
}

// GroupView is the consumer group and topic as seen once, for all partitions.
type GroupView struct {
	Topic      string
	Group      string
	Partitions map[int32]PartitionView
	// GroupState is Stable, Empty, PreparingRebalance, Dead, ...
	GroupState string
	// Members are the group's current member ids and client ids.
	Members []GroupMember
	// GroupExists is false when the broker says the group id does not exist.
	GroupExists bool
	// Unknown are the fields a request that failed, or that the broker does
	// not support, would have given (docs/where.md "When a Kafka request
	// fails"); every other field was read. A field named here holds its
	// zero value (Committed -1), which means nothing.
	Unknown []UnknownField
}

// Fields of a GroupView that can be unknown on their own, each read by
// its own request.
const (
	// FieldCommitted: every partition's Committed (OffsetFetch).
	FieldCommitted = "committed"
	// FieldLogStart and FieldLogEnd: every partition's LogStart and LogEnd
	// (ListOffsets earliest and latest).
	FieldLogStart = "log_start"
	FieldLogEnd   = "log_end"
	// FieldGroup: GroupState, Members, the partitions' Owner and
	// GroupExists (DescribeGroups).
	FieldGroup = "group_state"
)

// UnknownField is a field of a Kafka view that could not be read, and why.
type UnknownField struct {
	Field string
	Why   string
}

// Known reports whether field was read (it is not in g.Unknown).
func (g GroupView) Known(field string) bool {
	_, unknown := g.Why(field)
	return !unknown
}

// Why returns why field is unknown, and whether it is.
func (g GroupView) Why(field string) (string, bool) {
	for _, u := range g.Unknown {
		if u.Field == field {
			return u.Why, true
		}
	}
	return "", false
}

// PartialKafkaError is the error of Kafka.Group when some requests of the
// view failed and others answered: the view returned with it holds what
// was read, and names the rest in Unknown. A caller that needs the whole
// view treats it as any error; one that can use part of it keeps the
// view (errors.As).
type PartialKafkaError struct {
	Unknown []UnknownField
}

// Error names every unknown field and why.
func (e *PartialKafkaError) Error() string {
	parts := make([]string, len(e.Unknown))
	for i, u := range e.Unknown {
		parts[i] = u.Field + " unknown (" + u.Why + ")"
	}
	return "partial read: " + strings.Join(parts, "; ")
}

// Partial reports that the view returned with the error holds what was
// read.
func (e *PartialKafkaError) Partial() bool { return true }

// GroupMember is one consumer group member.
type GroupMember struct {
	MemberID   string
	ClientID   string
	ClientHost string
	// Partitions of the pipeline topic assigned to this member.
	Partitions []int32
}

// LocateRequest asks where one operation's message is.
type LocateRequest struct {
	Topic       string
	Partitioner string // murmur2 | fnv1a | crc32 | stored
	Key         []byte
	MsgID       string
	// Partition and Offset are the stored position, -1 when unknown.
	Partition int32
	Offset    int64
	// Around is the earliest known timestamp of the operation (zero: unknown).
	Around time.Time
	Window time.Duration
	Limit  int
	// All asks for every committed record of the key in the window
	// (Location.Messages), not the first: the messages through which the
	// records of an idempotency table without a biz_id are found.
	All bool
	// Newest asks for the newest records: the search starts at the later
	// of the offset for (Around − Window) and the log end less Limit, so
	// that a bounded search anchored at now reads the records nearest to
	// now (an operation no row anchors: docs/where.md "Finding the
	// message").
	Newest bool
}

// Location is where a message was found.
type Location struct {
	// Partition and Offset are -1 when unknown. A stored position is
	// reported even when the record is no longer retained.
	Partition int32
	Offset    int64
	// Located is stored, searched or unknown.
	Located string
	// Message is the record read back, nil when it could not be read
	// (deleted by retention, or not found).
	Message *Message
	// Detail says how the search went: records scanned, why it stopped.
	Detail string
	// Messages are every record of the key in the window, oldest first,
	// when the request asked for All (Message is then the first).
	Messages []*Message
}

// KafkaEvidence is everything read from Kafka for one operation.
type KafkaEvidence struct {
	Group GroupView
	// Partition/Offset of the message; -1 when unknown.
	Partition int32
	Offset    int64
	Located   string
	// Message is the record read back, when it could be read.
	Message *Message
	// SearchDetail says how the search went (records scanned, why it stopped).
	SearchDetail string
}

// Evidence is everything opctl read about one operation in one pipeline.
type Evidence struct {
	BizID    string
	Pipeline *config.Pipeline
	DB       DBEvidence
	Kafka    KafkaEvidence
	// Sources maps "mysql" and "kafka" to "ok", "skipped" or why not (a
	// failed query of MySQL, Kafka unreachable): any other value makes the
	// report partial. A probe is not a source: its answer, conclusive or
	// not, is in the intent's Probe or the step's BizProbe
	// (docs/verdicts.md#partial).
	Sources map[string]string
}

// DB reads one operation's rows from MySQL.
type DB interface {
	// ReadOperation issues every query for the operation concurrently (state
	// with NOW(6), each step's evidence and intents, idempotency, entity,
	// audit) and returns what it read. A failing query of a single step is
	// recorded in that step's Err; an error is returned only when nothing
	// could be read (connection refused, auth failed).
	ReadOperation(ctx context.Context, p *config.Pipeline, auditTable string, bizID string) (DBEvidence, error)
}

// SnapshotDB is a DB that can also read one operation in one consistent
// snapshot (sources/mysql: one connection, one READ ONLY transaction):
// ReadOperationSnapshot returns what ReadOperation returns, every row as
// of one instant, so that what one transaction of a consumer wrote is
// read whole or not at all. The watch confirms a target with it before it
// flags it (Collector.Snapshot, docs/watch.md#how-it-works).
type SnapshotDB interface {
	DB
	ReadOperationSnapshot(ctx context.Context, p *config.Pipeline, auditTable string, bizID string) (DBEvidence, error)
}

// IdempotencyByKeys is a DB that can read a pipeline's idempotency records
// by their keys (msg ids): how a table without a biz_id column is linked to
// an operation, through its messages (docs/where.md).
type IdempotencyByKeys interface {
	ReadIdempotencyByKeys(ctx context.Context, p *config.Pipeline, keys []string) ([]IdempotencyRow, error)
}

// ColumnTyper reads a column's declared type (information_schema's
// COLUMN_TYPE).
type ColumnTyper interface {
	ColumnType(ctx context.Context, table, column string) (string, error)
}

// Kafka reads the group and log positions and locates a message.
type Kafka interface {
	// Group reads, for every partition of topic, the group's committed offset,
	// log start and end, and the group's state and member assignments.
	Group(ctx context.Context, topic, group string) (GroupView, error)
	// Locate finds one message: at its stored position, or by partitioner +
	// timestamp lookup + bounded forward scan (never from the partition
	// head). A message that is not found is not an error: the Location then
	// has Located "unknown" and a Detail saying why.
	Locate(ctx context.Context, req LocateRequest) (Location, error)
}

// BatchLocator is a Kafka that can locate many messages at once: the
// stored positions of a batch are read together (the log bounds of their
// partitions once, each partition's offsets by as few fetches as cover
// them) instead of one round each.
type BatchLocator interface {
	// LocateMany returns, for every reqs[i], what Locate(ctx, reqs[i])
	// returns: locs[i] and errs[i]. A failure of a read several requests
	// share (the topic's metadata, the log bounds, a fetch) is the error
	// of each of them.
	LocateMany(ctx context.Context, reqs []LocateRequest) (locs []Location, errs []error)
}

// RecordsRead is what a read of a topic over a time window found.
type RecordsRead struct {
	// Records is how many data records were handed over.
	Records int
	// Cut lists the partitions whose read stopped at its limit before the
	// window ended.
	Cut []int32
}

// RecordReader reads a topic over a time window (reconcile's reads of a
// topic: docs/reconcile.md#reading-the-topic).
type RecordReader interface {
	Records(ctx context.Context, topic string, from, to time.Time, limit int, each func(*Message)) (RecordsRead, error)
}

// Prober asks a downstream service whether a call took effect.
type Prober interface {
	// Probe GETs url and classifies the answer with the step's configured
	// applied and absent status values.
	Probe(ctx context.Context, url string, applied, absent []string) ProbeResult
}

// Poster sends a compensation to a downstream service.
type Poster interface {
	// Post sends body (JSON) to url with the given extra headers and reads
	// the answer. It never returns an error: a failure is a PostResult with
	// Answered false (the request may have taken effect) or a non-2xx
	// Status, and a Detail. Credentials in the URL never appear in it.
	Post(ctx context.Context, url string, body []byte, headers map[string]string) PostResult
}

// PostResult is a downstream's answer to a POST (a compensation call).
type PostResult struct {
	// Status is the HTTP status code; 0 when no answer was received.
	Status int
	// Body is the start of the answer (at most MaxBody bytes).
	Body string
	// URL is the URL posted to, without userinfo.
	URL string
	// Answered is false when the request may or may not have reached the
	// service (a timeout, a reset connection): its effect is unknown.
	Answered bool
	// Detail says what happened, without credentials.
	Detail string
}

// OK reports whether the service answered 2xx.
func (r PostResult) OK() bool { return r.Answered && r.Status >= 200 && r.Status <= 299 }
