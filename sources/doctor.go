package sources

import "time"

// DoctorFacts is what `opctl doctor` read from the live systems: plain
// facts, filled by the drivers (sources/mysql.Reader.DoctorFacts,
// sources/kafka.Reader.DoctorFacts) and the schema check, and judged by
// sop/doctor (docs/doctor.md). A fact that could not be read says why in
// its Err field; it is never guessed.
type DoctorFacts struct {
	// MySQLErr is set when the read path could not be used at all.
	MySQLErr string
	// Database is the read DSN's database.
	Database string
	// Tables are the configured tables by name, as the config spells them.
	Tables map[string]TableFacts
	// Schema is what `opctl schema check` found: tables, columns, and the
	// indexes reconcile needs.
	Schema []SchemaFact
	// Snippets are the config's SQL snippets, each prepared on the server.
	Snippets []SnippetFact
	// ReadGrants are the read DSN user's; WriteGrants the write DSN's (nil
	// when the write path is the read DSN).
	ReadGrants  GrantFacts
	WriteGrants *GrantFacts
	// BinlogGrants are the binlog DSN user's (nil when no pipeline reads
	// the binlog, or it is read through the read DSN).
	BinlogGrants *GrantFacts
	Server       ServerFacts

	// KafkaErr is set when the brokers could not be used at all.
	KafkaErr string
	// OffsetsRetention is the broker's offsets.retention.minutes
	// (DescribeConfigs); 0 with OffsetsRetentionErr when unknown.
	OffsetsRetention    time.Duration
	OffsetsRetentionErr string
	// Pipelines are the facts of each pipeline, by name.
	Pipelines map[string]PipelineFacts
}

// TableFacts is one table of information_schema.
type TableFacts struct {
	Exists  bool
	Columns []string
	// Types are the columns' declared types (COLUMN_TYPE), by position.
	Types []string
}

// SchemaFact is one item of the schema check: a table, a column or an
// index reconcile needs.
type SchemaFact struct {
	Pipeline string
	// Kind is table, column or index.
	Kind  string
	Table string
	// What is the column, or the index's columns "(a, b)".
	What string
	OK   bool
	// Index is the index that serves a need; DDL adds a missing one.
	Index  string
	DDL    string
	Checks []string
	Why    string
}

// SnippetFact is one configured SQL snippet prepared on the server.
type SnippetFact struct {
	Pipeline string
	// What names it ("step debit evidence").
	What string
	// Err is the server's answer when it does not prepare.
	Err string
}

// GrantFacts are one user's SHOW GRANTS, and whether its server refuses
// writes.
type GrantFacts struct {
	User  string
	Lines []string
	Err   string
	// ReadOnly are the server's read-only variables that are ON
	// (read_only, super_read_only, innodb_read_only): a write path there
	// fails on its first statement. ReadOnlyErr says why they could not be
	// read.
	ReadOnly    []string
	ReadOnlyErr string
}

// ServerFacts are the server variables doctor reads.
type ServerFacts struct {
	// TimeZone is @@global.time_zone; SystemTimeZone @@system_time_zone.
	TimeZone       string
	SystemTimeZone string
	// LogBin, BinlogFormat and BinlogRowImage are @@log_bin,
	// @@binlog_format, @@binlog_row_image.
	LogBin         bool
	BinlogFormat   string
	BinlogRowImage string
	// BinaryLogs is SHOW BINARY LOGS (oldest first); BinlogErr why it
	// could not be read. OldestBinlog is the time of the oldest binlog's
	// first event when known.
	BinaryLogs   []string
	OldestBinlog time.Time
	BinlogErr    string
	Err          string
}

// PipelineFacts are the Kafka and sample facts of one pipeline.
type PipelineFacts struct {
	TopicExists bool
	Partitions  int32
	TopicErr    string
	// Retention is the topic's retention.ms (negative: unlimited).
	Retention    time.Duration
	RetentionErr string
	// GroupState is the group's state (Stable, Empty, Dead, ...) and
	// GroupMembers its member count.
	GroupState   string
	GroupMembers int
	GroupErr     string
	// Samples are recent state rows with a stored partition.
	Samples   []PartitionSample
	SampleErr string
}

// PartitionSample is one state row's id, message id ("" without a msg_id
// column) and stored partition.
type PartitionSample struct {
	BizID     string
	MsgID     string
	Partition int32
}
