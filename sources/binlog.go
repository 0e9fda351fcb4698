package sources

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"
)

// BinlogRequest asks for the changes one operation may have made to one
// table's row, in a time window (docs/config.md#binlog).
type BinlogRequest struct {
	// Schema and Table name the changed table.
	Schema, Table string
	// KeyColumn and DeltaColumn are the row's identity column and the column
	// whose after − before is an effect's size.
	KeyColumn, DeltaColumn string
	// Key is the row's key, as text (from the operation's message); ""
	// asks for the changes of every row (reconcile's scan of a window).
	Key string
	// From and To bound the events' timestamps (seconds: the binlog's
	// resolution), both included.
	From, To time.Time
	// TxSchema, TxTable and TxColumn, when set, name the table and column
	// whose rows written in the same transaction tie a change to an
	// operation (binlog.transaction).
	TxSchema, TxTable, TxColumn string
	// Clamp reads a window that starts before the oldest binlog the server
	// keeps from where the binlog begins (reconcile's scan, which says
	// so), instead of failing; BinlogRead.From says where the read began.
	Clamp bool
}

// BinlogChange is one UPDATE of the requested row, as the binlog holds it:
// facts only, no attribution.
type BinlogChange struct {
	// GTID is the transaction's GTID ("0-1-42" on MariaDB, "uuid:42" on
	// MySQL), "" when the server writes none.
	GTID string
	// File and Pos locate the rows event (its start) in the binlog.
	File string
	Pos  uint32
	// Row is the row's index within the event's rows (0-based).
	Row int
	// XID is the transaction's commit id (0 when not known).
	XID uint64
	// At is the event's timestamp (seconds).
	At time.Time
	// Key is the key column's value (int64 or string).
	Key Value
	// Before and After are the delta column's values as exact decimal text.
	Before, After string
	// TxKeys are the values of the transaction column in the rows of that
	// table written (inserted or updated) in the same transaction.
	TxKeys []string
}

// ID is the change's identity: "<gtid>#<row>", or "<file>:<pos>#<row>"
// without a GTID (docs/where.md#binlog-evidence).
func (c BinlogChange) ID() string {
	if c.GTID != "" {
		return fmt.Sprintf("%s#%d", c.GTID, c.Row)
	}
	return fmt.Sprintf("%s:%d#%d", c.File, c.Pos, c.Row)
}

// Delta is After − Before, exactly, or an error when either is not a
// decimal.
func (c BinlogChange) Delta() (string, error) { return DecimalSub(c.After, c.Before) }

// BinlogRead is what one read of the binlog found.
type BinlogRead struct {
	Changes []BinlogChange
	// From is where the read began: the request's From, or the oldest
	// binlog's start when the request was clamped to it.
	From time.Time
	// Files are the binlog files read; Bytes how many bytes of events.
	Files []string
	Bytes int64
}

// Binlog reads row changes from a server's binlog as a replica does.
type Binlog interface {
	// Changes returns the UPDATEs of req's row in req's window. An error
	// says why the window could not be read (log_bin off, not ROW, the
	// window no longer in the binlog, no connection): the step is then
	// unknown and the report partial.
	Changes(ctx context.Context, req BinlogRequest) (BinlogRead, error)
}

// Attributions of a binlog change (the "attribution" column).
const (
	// AttributedTransaction: a row of binlog.transaction in the same
	// transaction names this operation.
	AttributedTransaction = "transaction"
	// AttributedMessage: the change matches the message's key and delta,
	// and no transaction row names another operation.
	AttributedMessage = "message"
)

// BinlogColumns are the columns of the evidence row of a binlog change, in
// order: its identity, the row's key, the delta, the delta column before
// and after, the event time and how it was attributed.
var BinlogColumns = []string{"id", "key", "delta", "before", "after", "at", "attribution"}

// IsBinlogChange reports whether r is the evidence row of a binlog change
// (its columns are BinlogColumns).
func (r Row) IsBinlogChange() bool { return slices.Equal(r.Columns, BinlogColumns) }

// binlogDecimal marks the DECIMAL columns of BinlogColumns: bound back
// exactly by a reverse statement.
var binlogDecimal = []bool{false, false, true, true, true, false, false}

// AttributeChanges selects the changes that count as effects of operation
// bizID when no other operation competes for them
// (docs/where.md#binlog-evidence): those whose delta equals delta (compared
// as numbers, "-30" = "-30.00") that AssignChanges gives it with it as the
// only claimant. With txSet (binlog.transaction configured), a change whose
// transaction wrote a row naming bizID counts for certain (attribution
// "transaction"); one whose transaction names only other operations does
// not count, nor does an untied one before its first tied change; one
// with no such row counts by the message ("message"). It returns them as
// evidence rows (BinlogColumns), in binlog order. A collector weighs the
// other operations too (Collector.attribute).
func AttributeChanges(changes []BinlogChange, bizID, delta string, txSet bool) ([]Row, error) {
	want, ok := new(big.Rat).SetString(delta)
	if !ok {
		return nil, fmt.Errorf("the message's delta %q is not a number", delta)
	}
	matching, err := sameRowDelta(changes, "", want)
	if err != nil {
		return nil, err
	}
	claims := make([]Claim, len(matching))
	for i, ch := range matching {
		if !txSet {
			ch.TxKeys = nil
		}
		claims[i] = Claim{Change: ch}
	}
	a := AssignChanges(claims, []Claimant{{BizID: bizID}})
	rows, _ := ownRows(claims, a, bizID, BinlogRequest{})
	return rows, nil
}

// RepeatedChanges returns, sorted, the operations that a table-wide read of
// the binlog suspects of a repeated effect (reconcile's duplicates check,
// docs/reconcile.md): an operation whose transaction (binlog.transaction)
// tied a change of a row, followed within window by another change of the
// same row with the same delta that no transaction ties to another
// operation. Each is then triaged as `opctl where` does, which decides.
func RepeatedChanges(changes []BinlogChange, window time.Duration) []string {
	type rowDelta struct{ key, delta string }
	byRow := map[rowDelta][]BinlogChange{}
	var order []rowDelta
	for _, c := range changes {
		d, err := c.Delta()
		if err != nil {
			continue
		}
		if r, ok := new(big.Rat).SetString(d); ok {
			d = r.RatString() // "-30.00" and "-30" are one delta
		}
		k := rowDelta{fmt.Sprint(c.Key), d}
		if _, ok := byRow[k]; !ok {
			order = append(order, k)
		}
		byRow[k] = append(byRow[k], c)
	}
	seen := map[string]bool{}
	var out []string
	for _, k := range order {
		cs := byRow[k]
		for i, c := range cs {
			for _, biz := range c.TxKeys {
				if seen[biz] {
					continue
				}
				for _, later := range cs[i+1:] {
					if later.At.Sub(c.At) > window {
						break
					}
					if len(later.TxKeys) == 0 || slices.Contains(later.TxKeys, biz) {
						seen[biz] = true
						out = append(out, biz)
						break
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// BinlogLockedRows are a binlog step's evidence rows as a repair binds them:
// the delta, before and after bound exactly as DECIMALs.
func BinlogLockedRows(rows []Row) LockedRows {
	lr := LockedRows{Columns: BinlogColumns, Decimal: binlogDecimal}
	for _, r := range rows {
		lr.Values = append(lr.Values, r.Values)
	}
	return lr
}

// DecimalSub returns a − b for two decimals written in text, exactly, with
// as many fraction digits as the longer of the two ("70.00" − "100.00" =
// "-30.00").
func DecimalSub(a, b string) (string, error) {
	x, ok := new(big.Rat).SetString(a)
	if !ok {
		return "", fmt.Errorf("%q is not a decimal", a)
	}
	y, ok := new(big.Rat).SetString(b)
	if !ok {
		return "", fmt.Errorf("%q is not a decimal", b)
	}
	return x.Sub(x, y).FloatString(max(scale(a), scale(b))), nil
}

// scale is how many digits follow the decimal point of s.
func scale(s string) int {
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return len(s) - i - 1
	}
	return 0
}

// Repeat is one row the binlog shows changed more than once by the same
// delta within a window: the changes a repeated effect leaves when no
// transaction names their operations (seed 000's autocommit debit).
type Repeat struct {
	// Key is the row's key and Delta the delta (CanonDecimal), as text.
	Key, Delta string
	// First and Last are the times of the first and the last change.
	First, Last time.Time
	// Changes is how many changes of the row by Delta there are.
	Changes int
}

// Repeats finds, in binlog order, the rows changed more than once by the
// same delta with no more than window between one change and the next
// (reconcile's duplicates check of a binlog step without
// binlog.transaction, docs/reconcile.md#binlog-steps). Which operations
// made them is for the messages and the attribution of a triage to say.
func Repeats(changes []BinlogChange, window time.Duration) []Repeat {
	type rowDelta struct{ key, delta string }
	byRow := map[rowDelta][]BinlogChange{}
	var order []rowDelta
	for _, c := range changes {
		d, err := c.Delta()
		if err != nil {
			continue
		}
		k := rowDelta{fmt.Sprint(c.Key), CanonDecimal(d)}
		if _, ok := byRow[k]; !ok {
			order = append(order, k)
		}
		byRow[k] = append(byRow[k], c)
	}
	var out []Repeat
	for _, k := range order {
		cs := byRow[k]
		for i := 1; i < len(cs); i++ {
			if cs[i].At.Sub(cs[i-1].At) > window {
				continue
			}
			out = append(out, Repeat{Key: k.key, Delta: k.delta, First: cs[0].At, Last: cs[len(cs)-1].At, Changes: len(cs)})
			break
		}
	}
	return out
}

// CanonDecimal writes a decimal in one spelling ("-30.00", "-30" and
// "-30.0" are "-30"), so that deltas compare as numbers; text that is not a
// decimal is returned as it is.
func CanonDecimal(s string) string {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return s
	}
	return r.RatString()
}
