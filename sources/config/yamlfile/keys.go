package yamlfile

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Resolve follows an alias to the node its anchor names (nil for an
// alias of nothing, which the parser refuses); other nodes are returned
// as they are.
func Resolve(n *Node) *Node {
	for range MaxNesting {
		if n == nil || n.Kind != AliasNode {
			return n
		}
		n = n.Alias
	}
	return nil
}

// IsNull reports whether n is nothing: absent, or a null scalar ("", ~,
// null).
func IsNull(n *Node) bool {
	return n == nil || n.Kind == ScalarNode && n.ShortTag() == "!!null"
}

// IsMerge reports whether key node k is the merge key "<<".
func IsMerge(k *Node) bool { return k.Kind == ScalarNode && k.ShortTag() == "!!merge" }

// KindName names what node n is, for messages: "a mapping", "a list",
// "a boolean", "a number", `the string "x"`, or "nothing".
func KindName(n *Node) string {
	n = Resolve(n)
	switch {
	case n == nil:
		return "nothing"
	case n.Kind == MappingNode:
		return "a mapping"
	case n.Kind == SequenceNode:
		return "a list"
	}
	switch n.ShortTag() {
	case "!!bool":
		return "a boolean"
	case "!!int", "!!float":
		return "a number"
	case "!!null":
		return "nothing"
	}
	return fmt.Sprintf("the string %q", n.Value)
}

// Entry is one key: value of a mapping.
type Entry struct {
	// Key is the key's text; KeyNode and Value its nodes (Value is never
	// nil: a key without a value has a null scalar).
	Key      string
	KeyNode  *Node
	Value    *Node
	repeated *Node // the first entry of the same key, when this one repeats it
}

// Repeated is the key node of the earlier entry with the same key, or nil.
func (e Entry) Repeated() *Node { return e.repeated }

// Entries lists the key: value pairs of mapping node n in order. A key
// that is an alias is read as what it names; merge keys (<<) are kept as
// they are (see IsMerge). An entry whose key repeats an earlier one says
// so (Repeated). A key that is not a single value is in bad.
func Entries(n *Node) (entries []Entry, bad []*Node) {
	seen := make(map[string]*Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if IsMerge(kn) {
			entries = append(entries, Entry{Key: kn.Value, KeyNode: kn, Value: vn})
			continue
		}
		k := Resolve(kn)
		if k == nil || k.Kind != ScalarNode {
			bad = append(bad, kn)
			continue
		}
		e := Entry{Key: k.Value, KeyNode: kn, Value: vn}
		if first, dup := seen[e.Key]; dup {
			e.repeated = first
		} else {
			seen[e.Key] = kn
		}
		entries = append(entries, e)
	}
	return entries, bad
}

// Unknown is the message of key, which is not one of known:
// `unknown key "stauts" (did you mean "status"?)`, or without a close
// candidate `unknown key "colour"` (the caller says where and lists the
// keys).
func Unknown(key string, known []string) (msg string, suggested bool) {
	d := DidYouMean(key, known)
	return fmt.Sprintf("unknown key %q%s", key, d), d != ""
}

// Suggest returns the candidate a user most likely meant by word: a
// case-insensitive match, else the closest candidate within Levenshtein
// distance 2 (and shorter than the word itself, so that "x" does not
// suggest "id"). It returns "" when nothing is close.
func Suggest(word string, candidates []string) string {
	for _, c := range candidates {
		if strings.EqualFold(c, word) {
			return c
		}
	}
	best, bestD := "", 3
	lw := strings.ToLower(word)
	for _, c := range candidates {
		d := levenshtein(lw, strings.ToLower(c))
		if d < bestD && d < utf8.RuneCountInString(word) {
			best, bestD = c, d
		}
	}
	return best
}

// DidYouMean formats a suggestion as ` (did you mean "x"?)`, or "": the
// suggestion of every opctl file error (the configuration and runbooks).
func DidYouMean(word string, candidates []string) string {
	if s := Suggest(word, candidates); s != "" && s != word {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return ""
}

// levenshtein is the edit distance between a and b, counted in runes.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// AliasCount counts the values of the tree root with every alias replaced
// by a copy of what it names, as a decoder makes them, and returns the
// alias where they exceed the values written by more than limit (its line
// and name), or 0. Aliases under keys with prefix ignore ("" for none) do
// not count (their anchors do, where used): such keys are never decoded.
// Anchors precede their aliases, so one walk with the size of each
// anchor's value remembered suffices; the counts saturate, however many
// times aliases multiply.
func AliasCount(root *Node, limit int, ignore string) (line int, name string) {
	x := aliasCount{sizes: map[*Node]int{}, limit: limit, ignore: ignore}
	x.size(root)
	return x.line, x.name
}

type aliasCount struct {
	sizes       map[*Node]int // anchored node → the values of its copy, -1 while being counted
	added       int           // values the aliases add so far
	ignored     int           // > 0 under an ignored key
	ignore      string
	limit, line int
	name        string
}

// size is the number of values of n with its aliases expanded, at most
// limit+2 (enough to know that one alias of it adds too many). A pair of a
// mapping counts one, besides its key and value.
func (x *aliasCount) size(n *Node) int {
	if n == nil || x.line > 0 {
		return 0
	}
	if n.Anchor != "" && n.Kind != AliasNode {
		x.sizes[n] = -1
	}
	t := 1
	add := func(v int) { t = min(t+v, x.limit+2) }
	switch n.Kind {
	case MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ign := x.ignore != "" && k.Kind == ScalarNode && strings.HasPrefix(k.Value, x.ignore)
			if ign {
				x.ignored++
			}
			add(1 + x.size(k) + x.size(v))
			if ign {
				x.ignored--
			}
		}
	case SequenceNode:
		for _, c := range n.Content {
			add(x.size(c))
		}
	case AliasNode:
		s := x.sizes[n.Alias]
		if s <= 0 {
			return 1 // unknown, or its own anchor's value
		}
		if x.ignored == 0 {
			x.added = min(x.added+s-1, x.limit+1)
			if x.added > x.limit {
				x.line, x.name = n.Line, n.Value
			}
		}
		return s
	}
	if n.Anchor != "" {
		x.sizes[n] = t
	}
	return t
}

// Tagged reports whether n is written with a tag (!t, !!str).
func Tagged(n *Node) bool { return n.Style&yaml.TaggedStyle != 0 }
