package binlog

import (
	"context"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
)

// ENUM and SET columns: a row image holds an ENUM as its 1-based index
// and a SET as a bit mask; a follow's Values hold them as their text
// (sources.RowChange: the columns as text), named from
// information_schema.COLUMNS.COLUMN_TYPE.

// labels are an ENUM's or a SET's values in declaration order.
type labels struct {
	set    bool
	values []string
}

// readLabels reads the ENUM and SET columns of schema.table by name.
func (r *Reader) readLabels(ctx context.Context, conn *client.Conn, schema, table string) (map[string]labels, error) {
	res, err := r.query(ctx, conn, "read the ENUM and SET columns of "+schema+"."+table,
		"SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND DATA_TYPE IN ('enum', 'set')", schema, table)
	if err != nil {
		return nil, err
	}
	out := map[string]labels{}
	for i := 0; i < res.RowNumber(); i++ {
		name, _ := res.GetString(i, 0)
		typ, _ := res.GetString(i, 1)
		if l, ok := parseLabels(typ); ok {
			out[name] = l
		}
	}
	return out, nil
}

// parseLabels reads "enum('A','B')" or "set('x','y')" (a quote inside a
// value doubled, as information_schema writes it).
func parseLabels(typ string) (labels, bool) {
	var l labels
	lower := strings.ToLower(typ)
	switch {
	case strings.HasPrefix(lower, "enum("):
		typ = typ[len("enum("):]
	case strings.HasPrefix(lower, "set("):
		l.set, typ = true, typ[len("set("):]
	default:
		return l, false
	}
	for len(typ) > 0 && typ[0] == '\'' {
		var b strings.Builder
		i := 1
		for ; i < len(typ); i++ {
			if typ[i] == '\'' {
				if i+1 < len(typ) && typ[i+1] == '\'' {
					b.WriteByte('\'')
					i++
					continue
				}
				break
			}
			b.WriteByte(typ[i])
		}
		if i >= len(typ) {
			return l, false
		}
		l.values = append(l.values, b.String())
		typ = typ[i+1:]
		if strings.HasPrefix(typ, ",") {
			typ = typ[1:]
		}
	}
	return l, typ == ")"
}

// label is the text of an ENUM index or a SET mask; ok is false when v is
// not one (the image's value is then kept as it is).
func (l labels) label(v any) (string, bool) {
	var n uint64
	switch x := v.(type) {
	case int64:
		n = uint64(x)
	case uint64:
		n = x
	case int32:
		n = uint64(x)
	case int:
		n = uint64(x)
	default:
		return "", false
	}
	if !l.set {
		switch {
		case n == 0:
			return "", true // MySQL's invalid-value ''
		case n <= uint64(len(l.values)):
			return l.values[n-1], true
		}
		return strconv.FormatUint(n, 10), true
	}
	var parts []string
	for i, s := range l.values {
		if n&(1<<uint(i)) != 0 {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ","), true
}
