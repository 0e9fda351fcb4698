package config

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/opctl-dev/opctl/sources/config/yamlfile"
)

// LookupFunc looks up an environment variable, like os.LookupEnv.
type LookupFunc func(name string) (string, bool)

// expandString expands ${NAME} and ${NAME:-default} in s.
//
//   - ${NAME} is the variable's value; an unset variable expands to "" and
//     its name is returned in unset.
//   - ${NAME:-default} is the value when set and non-empty, else default
//     (itself expanded, so ${A:-${B}} works); a variable with a default is
//     never reported unset.
//   - $${ is a literal "${". A "$" not followed by "{" is literal, so
//     passwords such as "pa$$word" or "$ecret" are kept as written.
//
// A value taken from the environment is not expanded again, so it cannot
// inject further references.
func expandString(s string, lookup LookupFunc) (string, []string, error) {
	if !strings.Contains(s, "${") {
		return s, nil, nil
	}
	var b strings.Builder
	var unset []string
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${") {
			b.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			b.WriteByte(s[i])
			i++
			continue
		}
		end := closingBrace(s, i+2)
		if end < 0 {
			return "", nil, fmt.Errorf("unterminated ${ in value (write $${ for a literal ${)")
		}
		expr := s[i+2 : end]
		name, def, hasDef := strings.Cut(expr, ":-")
		if !validEnvName(name) {
			return "", nil, fmt.Errorf("invalid variable reference ${%s}: write ${NAME} or ${NAME:-default}", expr)
		}
		v, ok := lookup(name)
		switch {
		case hasDef && v == "":
			dv, du, err := expandString(def, lookup)
			if err != nil {
				return "", nil, err
			}
			v = dv
			unset = append(unset, du...)
		case !ok:
			unset = append(unset, name)
		}
		b.WriteString(v)
		i = end + 1
	}
	return b.String(), unset, nil
}

// closingBrace returns the index of the "}" closing a "${" whose body starts
// at from, allowing nested ${...} in a default, or -1.
func closingBrace(s string, from int) int {
	depth := 1
	for j := from; j < len(s); j++ {
		switch {
		case strings.HasPrefix(s[j:], "${"):
			depth++
			j++
		case s[j] == '}':
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

// expander applies expandString to every string value of a decoded Config.
// It works on values after decoding, never on the YAML text, so an
// environment value holding quotes, colons, "#" or newlines stays one
// string and cannot change the document's structure.
type expander struct {
	file   string
	lookup LookupFunc
	lines  map[string]int
	unset  map[string][]string
	errs   ErrorList
}

func (x *expander) walk(v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			x.walk(v.Elem(), path)
		}
	case reflect.Struct:
		for _, f := range yamlfile.Fields(v.Type()) {
			x.walk(v.Field(f.Index), joinPath(path, f.Name))
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			x.walk(v.Index(i), indexPath(path, i))
		}
	case reflect.String:
		out, unset, err := expandString(v.String(), x.lookup)
		if err != nil {
			m := &meta{lines: x.lines}
			x.errs = append(x.errs, &Error{File: x.file, Line: m.line(path), Msg: path + ": " + err.Error()})
			return
		}
		if len(unset) > 0 {
			x.unset[path] = append(x.unset[path], unset...)
		}
		v.SetString(out)
	}
}

// splitBrokers splits each kafka.brokers entry on commas, so that
// `brokers: ["${OPCTL_BROKERS}"]` with OPCTL_BROKERS="a:9092,b:9092" gives two
// brokers, and drops empty entries (an unset variable gives no broker, which
// ValidateKafka reports together with the variable's name). It returns the
// source path of each resulting broker.
func splitBrokers(in []string) (out, src []string) {
	for i, b := range in {
		for _, part := range strings.Split(b, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
				src = append(src, indexPath("kafka.brokers", i))
			}
		}
	}
	return out, src
}

// UnsetVars returns the names of the ${VAR}s without a default that were
// referenced by the file but not set in the environment, sorted and without
// repeats. Such a reference expanded to "".
func (c *Config) UnsetVars() []string {
	if c == nil || c.meta == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, names := range c.meta.unset {
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}

// UnsetVarsAt returns the unset ${VAR}s referenced by the value at path, a
// YAML path in the form "mysql.dsn", "kafka.sasl.password" or
// "pipelines[0].steps[2].probe", so a caller can say
// "mysql.dsn is empty: $OPCTL_MYSQL_DSN is not set". It returns nil for a
// value that referenced no unset variable.
func (c *Config) UnsetVarsAt(path string) []string {
	if c == nil || c.meta == nil {
		return nil
	}
	var out []string
	for _, n := range c.meta.unset[path] {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// unsetHint is ": $A is not set" (or ": $A and $B are not set") for the
// unset variables at path, or "".
func (c *Config) unsetHint(path string) string {
	return notSetHint(c.UnsetVarsAt(path))
}

// notSetHint formats ": $A is not set" / ": $A and $B are not set", or "".
func notSetHint(names []string) string {
	if len(names) == 0 {
		return ""
	}
	d := make([]string, len(names))
	for i, n := range names {
		d[i] = "$" + n
	}
	if len(d) == 1 {
		return ": " + d[0] + " is not set"
	}
	return ": " + strings.Join(d, " and ") + " are not set"
}
