package yamlfile

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Field is one decodable field of a struct: its yaml key, index and type.
type Field struct {
	Name  string
	Index int
	Type  reflect.Type
}

// Fields lists the fields of struct type t by their yaml key (the tag's
// name, else the lower-cased field name), in declaration order, skipping
// unexported fields and `yaml:"-"`.
func Fields(t reflect.Type) []Field {
	var out []Field
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
		out = append(out, Field{Name: name, Index: i, Type: f.Type})
	}
	return out
}

// Decode decodes root into the struct out points to, strictly: every
// unknown key (keys with prefix ignore excepted, at any level: "" for
// none), every repeated key and every value of the wrong kind is an
// *Error at its line, all of them reported, not the first only. A string
// field takes a scalar as written (`version: 3.50` is "3.50", `topic: 010`
// is "010"); a null leaves a field as it is. lines maps the path of every
// value present ("pipelines[0].state.table", "kafka.brokers[1]") to the
// line of its key, or of the item for a list item. Merge keys (<<: *a)
// merge as YAML says: the mapping's own keys win.
func Decode(root *Node, out any, ignore string) (lines map[string]int, errs []*Error) {
	d := &decoder{lines: map[string]int{}, ignore: ignore}
	d.value(root, reflect.ValueOf(out).Elem(), "")
	return d.lines, d.errs
}

type decoder struct {
	lines  map[string]int
	errs   []*Error
	ignore string
	depth  int
}

func (d *decoder) errorf(n *Node, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errs = append(d.errs, &Error{Kind: Invalid, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// JoinPath appends a key to a value path.
func JoinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// IndexPath appends a list index to a value path.
func IndexPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// value decodes node n into v at path.
func (d *decoder) value(n *Node, v reflect.Value, path string) {
	d.depth++
	defer func() { d.depth-- }()
	if d.depth > MaxNesting {
		d.errorf(n, "%s: nesting too deep", path)
		return
	}
	n = Resolve(n)
	if IsNull(n) {
		return
	}
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Struct:
		d.mapping(n, v, path)
	case reflect.Slice:
		if n.Kind != SequenceNode {
			hint := ""
			if n.Kind == ScalarNode && v.Type().Elem().Kind() == reflect.String {
				hint = fmt.Sprintf(" (write [%s] for a one-item list)", n.Value)
			}
			d.errorf(n, "%s: expected a list, found %s%s", path, KindName(n), hint)
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, el := range n.Content {
			p := IndexPath(path, i)
			d.lines[p] = el.Line
			d.value(el, s.Index(i), p)
		}
		v.Set(s)
	case reflect.String:
		if n.Kind != ScalarNode {
			d.errorf(n, "%s: expected a string, found %s", path, KindName(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		b, err := strconv.ParseBool(n.Value)
		if n.Kind != ScalarNode || n.ShortTag() != "!!bool" || err != nil {
			d.errorf(n, "%s: expected true or false, found %s", path, KindName(n))
			return
		}
		v.SetBool(b)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		u, err := strconv.ParseUint(strings.ReplaceAll(n.Value, "_", ""), 0, v.Type().Bits())
		if n.Kind != ScalarNode || n.ShortTag() != "!!int" || err != nil {
			d.errorf(n, "%s: expected a whole number from 0 to %d, found %s", path, uint64(1)<<v.Type().Bits()-1, KindName(n))
			return
		}
		v.SetUint(u)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, v.Type().Bits())
		if n.Kind != ScalarNode || n.ShortTag() != "!!int" || err != nil {
			d.errorf(n, "%s: expected a whole number, found %s", path, KindName(n))
			return
		}
		v.SetInt(i)
	default:
		d.errorf(n, "%s: cannot be read into a %s", path, v.Type())
	}
}

// mapping decodes a mapping node into struct v.
func (d *decoder) mapping(n *Node, v reflect.Value, path string) {
	if n.Kind != MappingNode {
		where := path
		if where == "" {
			where = "the file"
		}
		d.errorf(n, "%s: expected a mapping (key: value), found %s", where, KindName(n))
		return
	}
	fields := Fields(v.Type())
	known := make([]string, len(fields))
	byName := make(map[string]Field, len(fields))
	for i, f := range fields {
		known[i] = f.Name
		byName[f.Name] = f
	}
	entries, bad := Entries(n)
	for _, kn := range bad {
		where := path
		if where == "" {
			where = "top level"
		}
		d.errorf(kn, "%s: a key must be a plain word, found %s", where, KindName(kn))
	}
	// The merged mappings first: the mapping's own keys win.
	for _, e := range entries {
		if IsMerge(e.KeyNode) {
			d.merge(e.Value, v, path)
		}
	}
	for _, e := range entries {
		switch {
		case IsMerge(e.KeyNode):
			continue
		case e.Repeated() != nil:
			d.errorf(e.KeyNode, "key %q is repeated (first at line %d)", e.Key, e.Repeated().Line)
			continue
		}
		f, ok := byName[e.Key]
		if !ok {
			if d.ignore != "" && strings.HasPrefix(e.Key, d.ignore) {
				continue
			}
			// With a suggestion the message is exactly
			// `unknown key "stauts" (did you mean "status"?)`.
			msg, suggested := Unknown(e.Key, known)
			if !suggested {
				if path != "" {
					msg += " under " + path
				}
				msg += fmt.Sprintf(" (known keys: %s)", strings.Join(known, ", "))
			}
			d.errorf(e.KeyNode, "%s", msg)
			continue
		}
		p := JoinPath(path, e.Key)
		d.lines[p] = e.KeyNode.Line
		d.value(e.Value, v.Field(f.Index), p)
	}
}

// merge decodes the value of a merge key: a mapping, or a list of them.
func (d *decoder) merge(n *Node, v reflect.Value, path string) {
	n = Resolve(n)
	if n != nil && n.Kind == SequenceNode {
		for _, el := range n.Content {
			if el = Resolve(el); el != nil {
				d.mapping(el, v, path)
			}
		}
		return
	}
	if n != nil {
		d.mapping(n, v, path)
	}
}
