package reconcile

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// The cover of the steps without a scan block by their own tables
// (docs/reconcile.md#steps-without-a-scan-block): when each such step's
// effects are counted by one query that reads one table by its key column
// (`SELECT ... FROM step_intent WHERE biz_id = ? AND step = 'notify'`),
// an operation of such a step with two effects has two rows of that table
// under one key. Over a window that holds most of the state table, the
// keys of more than one row of each such table (one read of each index
// entry, the server returns only those keys) are a smaller read than the
// walk of every operation of the window with the step's query for each.

// snippetKey returns the table and the key column of q, a step's evidence
// or intent query, when every row q returns for an id is a row of that one
// table whose column equals the id: a SELECT from one table (an alias
// allowed) whose WHERE is a conjunction, at its top level, of `col = ?`
// (or `alias.col = ?`, `? = col`) and anything else. ok is false for
// anything it cannot tell: a join or a second table, an OR, XOR,
// BETWEEN or CASE at the top level of the WHERE, a GROUP BY, HAVING, UNION,
// a window, the `?` anywhere else. ORDER BY and LIMIT only drop rows.
func snippetKey(q string) (table, col string, ok bool) {
	clean, err := config.WithoutComments(q)
	if err != nil {
		return "", "", false
	}
	toks, ok := sqlTokens(clean)
	if !ok || len(toks) < 6 || !toks[0].word("SELECT") {
		return "", "", false
	}
	// Top-level positions of FROM and WHERE; nothing the rules reject.
	depth, from, where := 0, -1, -1
	for i, t := range toks {
		switch {
		case t.text == "(":
			depth++
		case t.text == ")":
			depth--
		case depth != 0:
		case t.word("FROM") && from < 0:
			from = i
		case t.word("WHERE") && from >= 0 && where < 0:
			where = i
		case t.word("GROUP", "HAVING", "UNION", "WINDOW", "INTO", "FOR", "LOCK", "JOIN", "STRAIGHT_JOIN", "OVER"):
			return "", "", false
		case where >= 0 && (t.word("OR", "XOR", "BETWEEN", "CASE") || t.text == "||"):
			// An OR makes the conjunction a disjunct; BETWEEN's and CASE's
			// own AND would be read as the conjunction's.
			return "", "", false
		}
	}
	if depth != 0 || from < 0 || where < 0 {
		return "", "", false
	}
	// FROM table [[AS] alias] WHERE
	tbl := toks[from+1 : where]
	if len(tbl) == 0 || !tbl[0].ident() {
		return "", "", false
	}
	table, alias := tbl[0].name(), tbl[0].name()
	switch {
	case len(tbl) == 1:
	case len(tbl) == 2 && tbl[1].ident() && !tbl[1].keyword():
		alias = tbl[1].name()
	case len(tbl) == 3 && tbl[1].word("AS") && tbl[2].ident():
		alias = tbl[2].name()
	default:
		return "", "", false
	}
	// The conjuncts of the WHERE, to its end or a top-level ORDER BY or
	// LIMIT.
	end := len(toks)
	depth = 0
	for i := where + 1; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.text == "(":
			depth++
		case t.text == ")":
			depth--
		case depth == 0 && t.word("ORDER", "LIMIT"):
			if end == len(toks) {
				end = i
			}
		}
	}
	var conj [][]sqlToken
	start := where + 1
	depth = 0
	for i := where + 1; i <= end; i++ {
		if i < end {
			t := toks[i]
			switch {
			case t.text == "(":
				depth++
			case t.text == ")":
				depth--
			}
			if !(depth == 0 && (t.word("AND") || t.text == "&&")) {
				continue
			}
		}
		conj = append(conj, toks[start:i])
		start = i + 1
	}
	placeholders := 0
	for _, t := range toks {
		if t.text == "?" {
			placeholders++
		}
	}
	if placeholders != 1 {
		return "", "", false
	}
	for _, c := range conj {
		if len(c) != 3 && len(c) != 5 {
			continue
		}
		var ref []sqlToken
		switch {
		case c[len(c)-1].text == "?" && c[len(c)-2].text == "=":
			ref = c[:len(c)-2]
		case c[0].text == "?" && c[1].text == "=":
			ref = c[2:]
		default:
			continue
		}
		switch {
		case len(ref) == 1 && ref[0].ident():
			col = ref[0].name()
		case len(ref) == 3 && ref[0].ident() && ref[1].text == "." && ref[2].ident() && strings.EqualFold(ref[0].name(), alias):
			col = ref[2].name()
		default:
			return "", "", false
		}
		if !config.ValidIdent(table) || !config.ValidIdent(col) {
			return "", "", false
		}
		return table, col, true
	}
	return "", "", false
}

// sqlToken is a token of snippetKey's reading: a word (identifier or
// keyword), a `quoted` identifier, a string or number literal, or a
// punctuation mark.
type sqlToken struct {
	text   string
	quoted bool // a `quoted` identifier (text without the backticks)
	lit    bool // a string or number
}

func (t sqlToken) word(ws ...string) bool {
	if t.quoted || t.lit {
		return false
	}
	for _, w := range ws {
		if strings.EqualFold(t.text, w) {
			return true
		}
	}
	return false
}

func (t sqlToken) ident() bool {
	if t.lit {
		return false
	}
	if t.quoted {
		return true
	}
	r := []rune(t.text)
	return len(r) > 0 && (unicode.IsLetter(r[0]) || r[0] == '_' || r[0] == '$')
}

// keyword reports words that end a FROM's table where an alias would be.
func (t sqlToken) keyword() bool {
	return t.word("WHERE", "JOIN", "INNER", "LEFT", "RIGHT", "CROSS", "NATURAL", "USE", "FORCE", "IGNORE", "PARTITION", "AS", "ON", "USING")
}

func (t sqlToken) name() string { return t.text }

// sqlTokens splits q into tokens; ok is false on an unterminated quote or
// a character it does not know.
func sqlTokens(q string) ([]sqlToken, bool) {
	var out []sqlToken
	r := []rune(q)
	for i := 0; i < len(r); {
		c := r[i]
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '`':
			j := i + 1
			var b strings.Builder
			for ; j < len(r); j++ {
				if r[j] == '`' {
					if j+1 < len(r) && r[j+1] == '`' {
						b.WriteRune('`')
						j++
						continue
					}
					break
				}
				b.WriteRune(r[j])
			}
			if j >= len(r) {
				return nil, false
			}
			out = append(out, sqlToken{text: b.String(), quoted: true})
			i = j + 1
		case c == '\'' || c == '"':
			j := i + 1
			for ; j < len(r); j++ {
				if r[j] == '\\' {
					j++
					continue
				}
				if r[j] == c {
					if j+1 < len(r) && r[j+1] == c {
						j++
						continue
					}
					break
				}
			}
			if j >= len(r) {
				return nil, false
			}
			out = append(out, sqlToken{text: string(r[i : j+1]), lit: true})
			i = j + 1
		case unicode.IsLetter(c) || unicode.IsDigit(c) || c == '_' || c == '$':
			j := i
			for j < len(r) && (unicode.IsLetter(r[j]) || unicode.IsDigit(r[j]) || r[j] == '_' || r[j] == '$') {
				j++
			}
			out = append(out, sqlToken{text: string(r[i:j]), lit: unicode.IsDigit(c)})
			i = j
		case strings.ContainsRune("|&!<>=", c):
			j := i
			for j < len(r) && strings.ContainsRune("|&!<>=", r[j]) {
				j++
			}
			out = append(out, sqlToken{text: string(r[i:j])})
			i = j
		case strings.ContainsRune("(),.?*+-/%;:@~^", c):
			out = append(out, sqlToken{text: string(c)})
			i++
		default:
			return nil, false
		}
	}
	return out, true
}

// CoverSweepFactor bounds the tables a cover sweep reads: at most this
// many entries for each operation the cover walk would read. The walk
// reads an index entry of the state table and, for each query of the
// steps it covers, at least one index entry per operation; a sweep reads
// each entry of those steps' tables once (docs/reconcile.md#steps-without-a-scan-block).
const CoverSweepFactor = 2

// coverFacts are what the cover's access path is chosen on.
type coverFacts struct {
	// Mode is --access.
	Mode string
	// Derived: every step to cover counts its effects by one query of one
	// table by its key (snippetKey), with no probe, and each such table
	// has an index that starts with the key, and the state table one on
	// its key (to keep the operations of the window).
	Derived bool
	// Window is the optimizer's estimate of the state rows the walk would
	// read (WindowKnown: it gave one); Tables the estimate of the rows of
	// the steps' tables together.
	Window      int64
	WindowKnown bool
	Tables      int64
}

// sweepCover decides whether the cover sweeps the steps' own tables
// (true) or walks the state table (false): --access walk walks, a step it
// cannot derive walks, --access sweep sweeps, and auto sweeps when the
// tables hold at most CoverSweepFactor entries per operation of the
// window, by the optimizer's estimates (no estimate: walk).
func sweepCover(f coverFacts) bool {
	switch {
	case f.Mode == AccessWalk || f.Mode == AccessRange || !f.Derived:
		return false
	case f.Mode == AccessSweep:
		return true
	case !f.WindowKnown || f.Window <= 0:
		return false
	}
	return f.Tables <= CoverSweepFactor*f.Window
}

// coverTable is one table a cover sweep reads: the steps' query reads it
// by col, through index.
type coverTable struct {
	step, table, col, index string
	rows                    int64
}

// coverTables derives the table of each step p's cover reaches (Unscanned):
// ok is false when one of them cannot be read that way (a probe, a binlog
// block, both an evidence and an intent query, a query snippetKey cannot
// read, a table without an index that starts with the key).
func (r *run) coverTables(cs *checkState, tables map[string]sources.TableInfo) ([]coverTable, bool, error) {
	p := cs.p
	var out []coverTable
	for _, name := range Unscanned(p) {
		s := p.Steps[p.StepIndex(name)]
		if s.Probe != "" || s.Binlog != nil || (s.Evidence != "") == (s.Intent != "") {
			return nil, false, nil
		}
		q := s.Evidence + s.Intent
		table, col, ok := snippetKey(q)
		if !ok {
			return nil, false, nil
		}
		info, err := r.tableInfo(cs, table, tables)
		if err != nil {
			return nil, false, err
		}
		use, ok := info.WalkIndex([]string{col}, col)
		if !info.Exists || !ok {
			return nil, false, nil
		}
		out = append(out, coverTable{step: name, table: table, col: col, index: use.Index.Name, rows: info.RowsEstimate})
	}
	return out, len(out) > 0, nil
}

// tableInfo reads table's columns and indexes once per pipeline run.
func (r *run) tableInfo(cs *checkState, table string, tables map[string]sources.TableInfo) (sources.TableInfo, error) {
	if info, ok := tables[table]; ok {
		return info, nil
	}
	ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
	defer cancel()
	info, err := r.db(cs.p).TableInfo(ctx, table)
	if err != nil {
		return info, err
	}
	tables[table] = info
	return info, nil
}

// coverWindow is the optimizer's estimate of the state rows the cover walk
// reads: its range of each status, summed (ok false: no estimate).
func (r *run) coverWindow(cs *checkState, a access, statuses []string, from, to time.Time) (int64, bool, error) {
	st := cs.p.State
	if st.UpdatedAt == "" || a.index == "" {
		return 0, false, nil
	}
	var n int64
	for _, status := range statuses {
		ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
		m, known, err := r.db(cs.p).StatusRangeRows(ctx, st.Table, a.index, st.Status, status, st.UpdatedAt, from, to)
		cancel()
		if err != nil || !known {
			return 0, false, err
		}
		n += m
	}
	return n, true, nil
}

// coverBySweep covers the steps without a scan block by sweeping their own
// tables (coverTables, sweepCover): the keys of more than one row of each,
// kept when the operation's state row was updated in the window (one
// lookup per page of such keys), are the cover's candidates, read for
// those steps (prefilter) and then triaged as the walk's are. done is
// false when the walk is the cheaper or the only path.
func (r *run) coverBySweep(cs *checkState, a access, statuses []string, tables map[string]sources.TableInfo, from, to time.Time) (done bool, err error) {
	if r.o.Access == AccessWalk || r.o.Access == AccessRange {
		return false, nil
	}
	ct, ok, err := r.coverTables(cs, tables)
	if err != nil || !ok {
		return false, err
	}
	st := cs.p.State
	f := coverFacts{Mode: r.o.Access, Derived: true}
	if st.UpdatedAt != "" {
		info, err := r.tableInfo(cs, st.Table, tables)
		if err != nil {
			return false, err
		}
		if _, ok := info.IndexFor(st.Key); !ok {
			f.Derived = false
		}
	}
	for _, c := range ct {
		f.Tables += c.rows
	}
	if f.Derived && f.Mode == AccessAuto {
		if f.Window, f.WindowKnown, err = r.coverWindow(cs, a, statuses, from, to); err != nil {
			return false, err
		}
	}
	if !sweepCover(f) {
		return false, nil
	}
	var names []string
	for _, c := range ct {
		sc := &config.Scan{Table: c.table, Key: c.col}
		path := sweepPath{index: c.index, est: c.rows}
		if st.UpdatedAt != "" {
			path.within = &sinceLookup{table: st.Table, key: st.Key, time: st.UpdatedAt}
		}
		if err := r.sweep(cs, sc, path, nil, tables, from, nil); err != nil {
			return true, err
		}
		names = append(names, fmt.Sprintf("%s (%s.%s, swept %s)", c.step, c.table, c.col, c.index))
	}
	how := "the optimizer puts the state table's window at ~" + fmt.Sprint(f.Window) + " rows, the steps' tables at ~" + fmt.Sprint(f.Tables)
	if f.Mode == AccessSweep {
		how = "--access sweep"
	}
	cs.notes = append(cs.notes, fmt.Sprintf("steps without a scan block covered by their own tables' keys of more than one row (%s), kept when the state row was updated in the window: %s", strings.Join(names, ", "), how))
	return true, nil
}
