package mysql

import (
	"context"
	"database/sql"
	"errors"
	"strings"
)

// MySQL and MariaDB list the primary key in information_schema.STATISTICS
// as the index PRIMARY. Some MySQL-protocol servers do not: go-mysql-server
// (the embedded server of `go run ./lab/demo`) leaves it out of STATISTICS,
// SHOW INDEX and KEY_COLUMN_USAGE, and marks its columns only with
// information_schema.COLUMNS.COLUMN_KEY = 'PRI'. Without the primary key,
// `schema check` reports every index the primary key serves as missing and
// reconcile refuses the checks that rely on it, so TableInfo takes it from
// COLUMNS when STATISTICS has none.

// addMissingPrimary adds the primary key to info when STATISTICS listed
// none and COLUMN_KEY marks the columns pri (in ordinal order). The order of
// a primary key of several columns is read from SHOW CREATE TABLE (one more
// statement, on such a server only); when it cannot be read there, no
// primary key is assumed.
func (r *Reader) addMissingPrimary(ctx context.Context, info *TableInfo, pri []string) error {
	cols, ok := primaryFromColumns(info.Indexes, pri)
	if !ok {
		return nil
	}
	if len(cols) > 1 {
		t, err := qident(info.Table)
		if err != nil {
			return err
		}
		var name, ddl string
		err = r.db.QueryRowContext(ctx, "SHOW CREATE TABLE "+t).Scan(&name, &ddl)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return r.queryError("primary key of "+info.Table, err)
		}
		ordered, prefix, found := primaryKeyOfDDL(ddl)
		if !found || !sameColumns(ordered, cols) {
			return nil
		}
		info.Indexes = insertIndex(info.Indexes, Index{Name: "PRIMARY", Columns: ordered, Unique: true, Primary: true, Prefix: prefix})
		return nil
	}
	info.Indexes = insertIndex(info.Indexes, Index{Name: "PRIMARY", Columns: cols, Unique: true, Primary: true, Prefix: []bool{false}})
	return nil
}

// primaryFromColumns decides whether the columns COLUMN_KEY marks 'PRI'
// are a primary key that STATISTICS left out. It is not when STATISTICS
// has a primary key (MySQL, MariaDB), or when a unique index has exactly
// these columns: MySQL and MariaDB mark as PRI the columns of a UNIQUE NOT
// NULL index of a table without a primary key, and that index is not named
// PRIMARY (FORCE INDEX (PRIMARY) would fail there).
func primaryFromColumns(indexes []Index, pri []string) ([]string, bool) {
	if len(pri) == 0 {
		return nil, false
	}
	for _, ix := range indexes {
		if ix.Primary || (ix.Unique && sameColumns(ix.Columns, pri)) {
			return nil, false
		}
	}
	return pri, true
}

// primaryKeyOfDDL reads the columns of the PRIMARY KEY clause of a CREATE
// TABLE statement as SHOW CREATE TABLE prints it (`PRIMARY KEY (`a`,`b`(10))`),
// in key order, with whether each is indexed on a prefix.
func primaryKeyOfDDL(ddl string) ([]string, []bool, bool) {
	const clause = "PRIMARY KEY ("
	i := strings.Index(ddl, clause)
	if i < 0 {
		return nil, nil, false
	}
	s := ddl[i+len(clause):]
	var cols []string
	var prefix []bool
	for {
		s = strings.TrimLeft(s, " ")
		if !strings.HasPrefix(s, "`") {
			return nil, nil, false
		}
		// A backquoted name; a doubled backquote is a backquote.
		var name strings.Builder
		j := 1
		for {
			if j >= len(s) {
				return nil, nil, false
			}
			if s[j] == '`' {
				if j+1 < len(s) && s[j+1] == '`' {
					name.WriteByte('`')
					j += 2
					continue
				}
				break
			}
			name.WriteByte(s[j])
			j++
		}
		s = strings.TrimLeft(s[j+1:], " ")
		part := false
		if strings.HasPrefix(s, "(") {
			end := strings.IndexByte(s, ')')
			if end < 0 {
				return nil, nil, false
			}
			part, s = true, strings.TrimLeft(s[end+1:], " ")
		}
		// ASC/DESC after a column.
		for _, kw := range []string{"ASC", "DESC"} {
			if len(s) >= len(kw) && strings.EqualFold(s[:len(kw)], kw) {
				s = strings.TrimLeft(s[len(kw):], " ")
			}
		}
		cols, prefix = append(cols, name.String()), append(prefix, part)
		switch {
		case strings.HasPrefix(s, ","):
			s = s[1:]
		case strings.HasPrefix(s, ")"):
			return cols, prefix, true
		default:
			return nil, nil, false
		}
	}
}

// sameColumns reports whether a and b hold the same columns, in any order,
// compared case-insensitively.
func sameColumns(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, c := range a {
		if !containsFold(b, c) {
			return false
		}
	}
	return true
}

// insertIndex inserts ix into indexes, kept in name order (compared
// case-insensitively, as information_schema orders them).
func insertIndex(indexes []Index, ix Index) []Index {
	at := len(indexes)
	for i, x := range indexes {
		if strings.ToLower(ix.Name) < strings.ToLower(x.Name) {
			at = i
			break
		}
	}
	out := make([]Index, 0, len(indexes)+1)
	out = append(out, indexes[:at]...)
	out = append(out, ix)
	return append(out, indexes[at:]...)
}
