package mysql

import "github.com/opctl-dev/opctl/sources"

// The values of the table-level reads are plain types of package sources,
// so that reconcile and sources/schema use them without linking this
// driver; these names keep the driver's own spelling.
type (
	// Walk is sources.Walk.
	Walk = sources.Walk
	// Cursor is sources.Cursor.
	Cursor = sources.Cursor
	// WalkRow is sources.WalkRow.
	WalkRow = sources.WalkRow
	// Index is sources.Index.
	Index = sources.Index
	// IndexUse is sources.IndexUse.
	IndexUse = sources.IndexUse
	// TableInfo is sources.TableInfo.
	TableInfo = sources.TableInfo
	// Sweep is sources.Sweep.
	Sweep = sources.Sweep
	// KeyCount is sources.KeyCount.
	KeyCount = sources.KeyCount
	// Bound is sources.Bound.
	Bound = sources.Bound
	// SweepEnd is sources.SweepEnd.
	SweepEnd = sources.SweepEnd
)

// Why an index is not used (Index.Disabled).
const (
	DisabledIgnored   = sources.DisabledIgnored
	DisabledInvisible = sources.DisabledInvisible
)
