package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// extensionPrefix marks keys that opctl ignores at any level, so that a file
// may hold YAML anchors for reuse (`x-steps: &common ...`), as in
// docker-compose. Every other unknown key is an error.
const extensionPrefix = "x-"

// meta is what Parse learned about a Config beyond its values.
type meta struct {
	file string
	// lines maps a value path ("pipelines[0].state.table") to the line of
	// its key, or of the element for a list item.
	lines map[string]int
	// unset maps a value path to the ${VAR}s it referenced that were unset.
	unset map[string][]string
	// brokerSrc is, for each loaded kafka.brokers entry (after splitting on
	// commas), the path of the YAML element it came from.
	brokerSrc []string
	// loaded values, to tell a value from the file from one a flag set.
	brokers       []string
	dsn, writeDSN string
}

// line returns the line of path, or of its nearest ancestor present in the
// file ("pipelines[0].state.table" falls back to "pipelines[0].state", ...),
// or 0.
func (m *meta) line(path string) int {
	if m == nil {
		return 0
	}
	for path != "" {
		if l, ok := m.lines[path]; ok {
			return l
		}
		path = parentPath(path)
	}
	return 0
}

// parentPath strips the last ".key" or "[i]" from a value path.
func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

// joinPath appends a key to a value path.
func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// indexPath appends a list index to a value path.
func indexPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// yamlField is one decodable field of a struct.
type yamlField struct {
	name  string
	index int
	typ   reflect.Type
}

// yamlFields lists the fields of struct type t by their yaml key, in
// declaration order, skipping unexported fields and `yaml:"-"`.
func yamlFields(t reflect.Type) []yamlField {
	var out []yamlField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out = append(out, yamlField{name: name, index: i, typ: f.Type})
	}
	return out
}

// shape checks a parsed YAML document against the Go types before goccy
// decodes it, so that every unknown key and every type mismatch is reported
// (goccy stops at the first), with a suggestion for misspelled keys. It also
// records the line of every value and the source text of scalars that goccy
// would normalise (`version: 3.50` decodes as "3.5", `topic: 010` as "8").
type shape struct {
	file    string
	lines   map[string]int
	raw     map[string]string
	errs    ErrorList
	anchors map[string]ast.Node
	depth   int
}

func newShape(file string) *shape {
	return &shape{
		file:    file,
		lines:   map[string]int{},
		raw:     map[string]string{},
		anchors: map[string]ast.Node{},
	}
}

func (s *shape) errorf(n ast.Node, format string, args ...any) {
	s.errs = append(s.errs, &Error{File: s.file, Line: nodeLine(n), Msg: fmt.Sprintf(format, args...)})
}

// nodeLine is the line a node starts on, or 0.
func nodeLine(n ast.Node) int {
	if n == nil {
		return 0
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line
	}
	return 0
}

// resolve strips tags and anchors (recording them) and follows aliases.
func (s *shape) resolve(n ast.Node) ast.Node {
	for range 64 {
		switch x := n.(type) {
		case *ast.TagNode:
			n = x.Value
		case *ast.AnchorNode:
			if x.Name != nil && x.Name.GetToken() != nil {
				s.anchors[x.Name.GetToken().Value] = x.Value
			}
			n = x.Value
		case *ast.AliasNode:
			if x.Value == nil || x.Value.GetToken() == nil {
				return nil
			}
			target, ok := s.anchors[x.Value.GetToken().Value]
			if !ok {
				return nil // goccy reports the unknown alias
			}
			n = target
		default:
			return n
		}
	}
	return n
}

// kindName names a YAML node kind for messages.
func kindName(n ast.Node) string {
	switch x := n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.BoolNode:
		return "a boolean"
	case *ast.IntegerNode:
		return "a number"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.StringNode, *ast.LiteralNode:
		return fmt.Sprintf("the string %q", scalarText(x))
	case nil:
		return "nothing"
	}
	return "a " + n.Type().String()
}

// scalarText is the source text of a scalar node.
func scalarText(n ast.Node) string {
	switch x := n.(type) {
	case *ast.StringNode:
		return x.Value
	case *ast.LiteralNode:
		if x.Value != nil {
			return x.Value.Value
		}
		return ""
	}
	if tk := n.GetToken(); tk != nil {
		return tk.Value
	}
	return ""
}

// isScalar reports whether n is a scalar YAML node.
func isScalar(n ast.Node) bool {
	switch n.(type) {
	case *ast.StringNode, *ast.LiteralNode, *ast.IntegerNode, *ast.FloatNode,
		*ast.BoolNode, *ast.InfinityNode, *ast.NanNode, *ast.NullNode:
		return true
	}
	return false
}

// value checks node n against Go type t at path.
func (s *shape) value(n ast.Node, t reflect.Type, path string) {
	s.depth++
	defer func() { s.depth-- }()
	if s.depth > 64 {
		s.errorf(n, "%s: nesting too deep", path)
		return
	}
	n = s.resolve(n)
	if n == nil {
		return
	}
	if _, ok := n.(*ast.NullNode); ok {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		s.mapping(n, t, path)
	case reflect.Slice:
		seq, ok := n.(*ast.SequenceNode)
		if !ok {
			hint := ""
			if isScalar(n) && t.Elem().Kind() == reflect.String {
				hint = fmt.Sprintf(" (write [%s] for a one-item list)", scalarText(n))
			}
			s.errorf(n, "%s: expected a list, found %s%s", path, kindName(n), hint)
			return
		}
		for i, el := range seq.Values {
			p := indexPath(path, i)
			s.lines[p] = nodeLine(el)
			s.value(el, t.Elem(), p)
		}
	case reflect.String:
		switch x := n.(type) {
		case *ast.StringNode, *ast.LiteralNode:
		case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
			s.raw[path] = x.GetToken().Value
		default:
			s.errorf(n, "%s: expected a string, found %s", path, kindName(n))
		}
	case reflect.Bool:
		if _, ok := n.(*ast.BoolNode); !ok {
			s.errorf(n, "%s: expected true or false, found %s", path, kindName(n))
		}
	default:
		// No other kinds in the config types; let goccy decide.
	}
}

// mapping checks a mapping node against struct type t.
func (s *shape) mapping(n ast.Node, t reflect.Type, path string) {
	var values []*ast.MappingValueNode
	switch x := n.(type) {
	case *ast.MappingNode:
		values = x.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{x}
	default:
		where := path
		if where == "" {
			where = "the file"
		}
		s.errorf(n, "%s: expected a mapping (key: value), found %s", where, kindName(n))
		return
	}
	fields := yamlFields(t)
	known := make([]string, len(fields))
	byName := map[string]yamlField{}
	for i, f := range fields {
		known[i] = f.name
		byName[f.name] = f
	}
	seen := map[string]int{}
	for _, mv := range values {
		if _, ok := mv.Key.(*ast.MergeKeyNode); ok {
			s.merge(mv.Value, t, path)
			continue
		}
		keyNode := s.resolve(mv.Key)
		if keyNode == nil || !isScalar(keyNode) {
			s.errorf(mv.Key, "%s: a key must be a plain word, found %s", orFile(path), kindName(keyNode))
			continue
		}
		key := scalarText(keyNode)
		line := nodeLine(mv.Key)
		if first, dup := seen[key]; dup {
			s.errs = append(s.errs, &Error{File: s.file, Line: line,
				Msg: fmt.Sprintf("key %q is repeated (first at line %d)", key, first)})
			continue
		}
		seen[key] = line
		f, ok := byName[key]
		if !ok {
			if strings.HasPrefix(key, extensionPrefix) {
				s.registerAnchors(mv.Value)
				continue
			}
			// With a suggestion the message is exactly
			// `unknown key "stauts" (did you mean "status"?)`.
			msg := fmt.Sprintf("unknown key %q", key)
			if d := didYouMean(key, known); d != "" {
				msg += d
			} else {
				if path != "" {
					msg += " under " + path
				}
				msg += fmt.Sprintf(" (known keys: %s)", strings.Join(known, ", "))
			}
			s.errs = append(s.errs, &Error{File: s.file, Line: line, Msg: msg})
			continue
		}
		p := joinPath(path, key)
		s.lines[p] = line
		s.value(mv.Value, f.typ, p)
	}
}

// merge checks the value of a `<<:` merge key.
func (s *shape) merge(n ast.Node, t reflect.Type, path string) {
	n = s.resolve(n)
	if seq, ok := n.(*ast.SequenceNode); ok {
		for _, el := range seq.Values {
			s.mapping(s.resolve(el), t, path)
		}
		return
	}
	if n != nil {
		s.mapping(n, t, path)
	}
}

func orFile(path string) string {
	if path == "" {
		return "top level"
	}
	return path
}

// registerAnchors records every anchor under n without checking n, for
// the values of ignored "x-" keys.
func (s *shape) registerAnchors(n ast.Node) {
	ast.Walk(anchorVisitor{s}, n)
}

type anchorVisitor struct{ s *shape }

// Visit implements ast.Visitor.
func (v anchorVisitor) Visit(n ast.Node) ast.Visitor {
	if a, ok := n.(*ast.AnchorNode); ok && a.Name != nil && a.Name.GetToken() != nil {
		v.s.anchors[a.Name.GetToken().Value] = a.Value
	}
	return v
}
