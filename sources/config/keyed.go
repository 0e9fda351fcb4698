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
