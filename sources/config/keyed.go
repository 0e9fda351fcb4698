package config

import "strings"

// KeyedSelect locates, in an evidence, intent or entity query, what a read
// of many operations in one statement needs to join the query with a list
// of keys (docs/reconcile.md#how-the-work-is-bounded): the byte offsets just
// after its SELECT keyword and its FROM keyword, and the offset of its one ?
// placeholder (the biz_id).
type KeyedSelect struct {
	AfterSelect, AfterFrom, Placeholder int
}

// CutKeyedSelect returns the cuts of q when q is a query whose rows, for
// one key, are exactly the rows the same query joined with a list of keys
// returns for that key: a plain SELECT <list> FROM <tables> [WHERE ...] with
// nothing at its top level that works across rows. It is false (the batched
// read then nests the query as it is, in a UNION ALL) when q has at its top
// level a GROUP BY, HAVING, ORDER BY, LIMIT, UNION, INTO, FOR or LOCK
// clause, a select modifier (DISTINCT, STRAIGHT_JOIN, SQL_...), a * that is
// not qualified, a function in its select list that is not a known scalar
// function (an aggregate over the joined rows would count every operation's
// rows at once), a window (OVER), or anywhere a variable (@, :=). Where the ?
// sits does not matter; a ? the join cannot reach (inside a derived table,
// in an ON clause) makes the server reject the statement, and the read then
// falls back in turn.
func CutKeyedSelect(q string) (KeyedSelect, bool) {
	toks, problem := statement(q)
	if problem != "" || checkQuery(q) != "" || len(toks) < 4 || !toks[0].is("SELECT") {
		return KeyedSelect{}, false
	}
	k := KeyedSelect{AfterSelect: toks[0].pos + len(toks[0].text), Placeholder: -1}
	if w := toks[1]; w.kind == tokWord && (selectModifiers[strings.ToUpper(w.text)] || strings.HasPrefix(strings.ToUpper(w.text), "SQL_")) {
		return KeyedSelect{}, false
	}
	depth := 0
	inList := true
	for i, t := range toks {
		if t.kind == tokPunct {
			switch t.text {
			case "(":
				depth++
			case ")":
				depth--
			case "?":
				k.Placeholder = t.pos
			case "@", ":":
				return KeyedSelect{}, false
			case "*":
				if inList && depth == 0 && (i == 0 || toks[i-1].kind != tokPunct || toks[i-1].text != ".") {
					return KeyedSelect{}, false
				}
			}
			continue
		}
		if depth != 0 || i == 0 {
			continue
		}
		call := i+1 < len(toks) && toks[i+1].kind == tokPunct && toks[i+1].text == "("
		if t.kind != tokWord {
			if inList && call {
				return KeyedSelect{}, false // `f`(...): a stored function, maybe an aggregate
			}
			continue
		}
		w := strings.ToUpper(t.text)
		if inList {
			if w == "FROM" {
				inList = false
				k.AfterFrom = t.pos + len(t.text)
				continue
			}
			if w == "OVER" || endsSelectList(t) {
				return KeyedSelect{}, false
			}
			if call && !scalarFuncs[w] {
				return KeyedSelect{}, false
			}
			continue
		}
		if acrossRows[w] {
			return KeyedSelect{}, false
		}
	}
	if inList || k.Placeholder < 0 || depth != 0 {
		return KeyedSelect{}, false
	}
	return k, true
}

// selectModifiers are the words that may follow SELECT and change what it
// returns or how it joins.
var selectModifiers = map[string]bool{
	"ALL": true, "DISTINCT": true, "DISTINCTROW": true, "HIGH_PRIORITY": true, "STRAIGHT_JOIN": true,
}

// acrossRows are the top-level words after FROM whose clause works on the
// rows of the whole result (or locks, or writes): with many keys joined,
// they would mix the operations.
var acrossRows = map[string]bool{
	"GROUP": true, "HAVING": true, "ORDER": true, "LIMIT": true, "OFFSET": true, "FETCH": true,
	"UNION": true, "EXCEPT": true, "INTERSECT": true, "MINUS": true, "INTO": true, "FOR": true,
	"LOCK": true, "PROCEDURE": true, "WINDOW": true, "RETURNING": true, "WITH": true,
}

// scalarFuncs are the functions (and the keywords written like them) a
// select list may call and still give each row its own value: none of
// them aggregates.
var scalarFuncs = map[string]bool{
	"ABS": true, "AND": true, "BINARY": true, "CAST": true, "CEIL": true, "CEILING": true,
	"CHAR_LENGTH": true, "COALESCE": true, "CONCAT": true, "CONCAT_WS": true, "CONVERT": true,
	"CONVERT_TZ": true, "CURRENT_TIMESTAMP": true, "DATE": true, "DATE_ADD": true,
	"DATE_FORMAT": true, "DATE_SUB": true, "EXISTS": true, "FLOOR": true, "FROM_UNIXTIME": true,
	"GREATEST": true, "HEX": true, "IF": true, "IFNULL": true, "IN": true, "ISNULL": true,
	"JSON_ARRAY": true, "JSON_EXTRACT": true, "JSON_OBJECT": true, "JSON_UNQUOTE": true,
	"JSON_VALUE": true, "LCASE": true, "LEAST": true, "LEFT": true, "LENGTH": true, "LOWER": true,
	"LTRIM": true, "MOD": true, "NOT": true, "NOW": true, "NULLIF": true, "OR": true,
	"REPLACE": true, "RIGHT": true, "ROUND": true, "RTRIM": true, "SIGN": true, "SUBSTR": true,
	"SUBSTRING": true, "TIME": true, "TIMESTAMPADD": true, "TIMESTAMPDIFF": true, "TRIM": true,
	"UCASE": true, "UNHEX": true, "UNIX_TIMESTAMP": true, "UPPER": true, "UTC_TIMESTAMP": true,
}

// PlainLookup reports whether q, which CutKeyedSelect accepts, reads one
// table by its key and nothing else: SELECT <list> FROM <table> [[AS]
// alias] WHERE <column> = ? [AND ...], with no subquery anywhere, no join,
// no index hint, and no OR (or XOR, ||) beside the key's comparison at the
// WHERE's top level. Its keyed form (the table joined with a list of keys)
// is then a lookup of each key in the table, as cheap per key as the query
// for one key is on the same index; any other query may be planned for a
// list of keys as something else entirely (MariaDB 10.11 reads a whole
// index once per list for a NOT EXISTS: docs/watch.md#how-it-works).
func PlainLookup(q string) bool {
	if _, ok := CutKeyedSelect(q); !ok {
		return false
	}
	toks, _ := statement(q)
	from, depth := -1, 0
	for i, t := range toks {
		switch {
		case i > 0 && t.is("SELECT"):
			return false // a subquery
		case t.kind == tokPunct && t.text == "(":
			depth++
		case t.kind == tokPunct && t.text == ")":
			depth--
		case depth == 0 && from < 0 && t.is("FROM"):
			from = i
		}
	}
	name := func(i int) bool { return i < len(toks) && (toks[i].kind == tokWord || toks[i].kind == tokIdent) }
	punct := func(i int, p string) bool { return i < len(toks) && toks[i].kind == tokPunct && toks[i].text == p }
	// The table: name or schema.name, then an alias, with or without AS.
	i := from + 1
	if !name(i) {
		return false
	}
	i++
	if punct(i, ".") {
		if !name(i + 1) {
			return false
		}
		i += 2
	}
	if i < len(toks) && toks[i].is("AS") {
		i++
		if !name(i) {
			return false
		}
		i++
	} else if name(i) && !toks[i].is("WHERE") {
		i++
	}
	if i >= len(toks) || !toks[i].is("WHERE") {
		return false
	}
	where := i + 1
	// The WHERE's top level: AND-ed terms, one of them <column> = ? or
	// ? = <column>.
	keyed := false
	depth = 0
	for i := where; i < len(toks); i++ {
		t := toks[i]
		if t.kind == tokPunct {
			switch t.text {
			case "(":
				depth++
			case ")":
				depth--
			case "|":
				if depth == 0 {
					return false
				}
			case "?":
				if depth != 0 {
					return false
				}
				keyed = keyTerm(toks, where, i)
				if !keyed {
					return false
				}
			}
			continue
		}
		if depth == 0 && (t.is("OR") || t.is("XOR")) {
			return false
		}
	}
	return keyed
}

// keyTerm reports whether the placeholder toks[q] is one side of a term
// <column> = ? (or ? = <column>) that stands alone between the WHERE
// (toks[where] is its first token), AND and the end: the column a name,
// or qualified by one.
func keyTerm(toks []sqlToken, where, q int) bool {
	isName := func(i int) bool {
		return i >= 0 && i < len(toks) && (toks[i].kind == tokWord || toks[i].kind == tokIdent)
	}
	isDot := func(i int) bool { return i >= 0 && i < len(toks) && toks[i].kind == tokPunct && toks[i].text == "." }
	isEq := func(i int) bool { return i >= 0 && i < len(toks) && toks[i].kind == tokPunct && toks[i].text == "=" }
	bound := func(i int, before bool) bool {
		if before {
			return i == where-1 || i >= where && toks[i].is("AND")
		}
		return i >= len(toks) || toks[i].is("AND")
	}
	// column = ?
	if isEq(q-1) && isName(q-2) && !toks[q-2].is("AND") && bound(q+1, false) {
		c := q - 2
		if isDot(c-1) && isName(c-2) {
			c -= 2
		}
		if bound(c-1, true) {
			return true
		}
	}
	// ? = column
	if isEq(q+1) && isName(q+2) && bound(q-1, true) {
		c := q + 2
		if isDot(c+1) && isName(c+2) {
			c += 2
		}
		return bound(c+1, false)
	}
	return false
}
