// Package yamlfile is the strict YAML layer of the files opctl reads: the
// configuration (sources/config) and the runbooks (sop). It parses one
// document with go.yaml.in/yaml/v3 into nodes that carry their line,
// refuses what no such file holds (a second document, nesting deeper than
// MaxNesting, a block mapping of more than MaxKeys keys, aliases that add
// more than a limit of values), and reads mappings key by key so that
// every unknown key and every repeated key is an error at its line, with a
// suggestion for a misspelt one (docs/config.md "What is checked when the
// file loads").
//
// The parser is a port of libyaml: its time and memory grow linearly with
// the input, however deep or wide (it stops at 10,000 levels by itself),
// so the limits are checks over the parsed tree.
package yamlfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Node is a parsed YAML node; Line and Column are 1-based.
type Node = yaml.Node

// Node kinds, as go.yaml.in/yaml/v3 names them.
const (
	MappingNode  = yaml.MappingNode
	SequenceNode = yaml.SequenceNode
	ScalarNode   = yaml.ScalarNode
	AliasNode    = yaml.AliasNode
)

// MaxNesting is how deeply the mappings and lists of a file may nest.
const MaxNesting = 64

// MaxKeys is how many keys one block mapping of a file may hold; the files
// opctl reads hold a few dozen.
const MaxKeys = 256

// Kind says what an Error refuses, for the callers that phrase it.
type Kind int

// Kinds of Error.
const (
	// Syntax is a file that is not YAML: Msg is the parser's message.
	Syntax Kind = iota
	// TooDeep is a file nested deeper than MaxNesting levels; Msg is
	// "nests deeper than 64 levels".
	TooDeep
	// TooWide is a block mapping of more than MaxKeys keys; Msg is "has a
	// mapping of more than 256 keys".
	TooWide
	// SecondDocument is a second YAML document (---) in the file.
	SecondDocument
	// Invalid is a value or key the reader of the file refuses; Msg says
	// why.
	Invalid
)

// Error is one problem of a file at a line (0: the file as a whole).
type Error struct {
	Kind Kind
	Line int
	Msg  string
}

// Error renders "line N: message".
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// Parse parses data (without a byte order mark) as one YAML document and
// returns its top node: nil when the file holds only comments. A second
// document that holds anything, a syntax error and a limit exceeded are an
// *Error with its line. A character YAML does not allow in a file (a
// control character, a byte that is not UTF-8) is read as U+FFFD, so that a
// file that is not YAML at all (an environment block, a binary) parses as
// the single value it is; in a mapping it is an error at its line.
func Parse(data []byte) (*Node, *Error) {
	masked, bad, badLine := mask(data)
	dec := yaml.NewDecoder(bytes.NewReader(masked))
	var root *Node
	for {
		var doc Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, syntaxError(masked, err)
		}
		body := docBody(&doc)
		if body == nil {
			continue
		}
		if root != nil {
			return nil, &Error{Kind: SecondDocument, Line: body.Line}
		}
		root = body
	}
	if root == nil {
		return nil, nil
	}
	if badLine > 0 && root.Kind == MappingNode {
		return nil, &Error{Kind: Syntax, Line: badLine, Msg: fmt.Sprintf("found character %s, which a YAML file may not hold", bad)}
	}
	if e := checkLimits(root, 1); e != nil {
		return nil, e
	}
	return root, nil
}

// docBody is the content of a document node, or nil for an empty one.
func docBody(doc *Node) *Node {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	b := doc.Content[0]
	if b.Kind == ScalarNode && b.Tag == "!!null" && b.Value == "" && b.Anchor == "" {
		return nil // "---" and nothing, or only comments
	}
	return b
}

// mask replaces each rune the YAML reader refuses (a control character
// other than tab and line breaks, a surrogate, U+FFFE/U+FFFF, a byte that
// is not UTF-8) with U+FFFD, keeping the lines. It returns the first such
// rune, quoted ('\x00', or a byte as '\xff'), and its line, or 0.
func mask(data []byte) (out []byte, first string, line int) {
	clean := true
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if !allowed(r, n) {
			clean = false
			break
		}
		i += n
	}
	if clean {
		return data, "", 0
	}
	out = make([]byte, 0, len(data)+16)
	ln := 1
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if !allowed(r, n) {
			if line == 0 {
				line = ln
				if r == utf8.RuneError {
					first = fmt.Sprintf(`'\x%02x'`, data[i])
				} else {
					first = strconv.QuoteRune(r)
				}
			}
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			if r == '\n' {
				ln++
			}
			out = append(out, data[i:i+n]...)
		}
		i += n
	}
	return out, first, line
}

// allowed reports whether the YAML reader accepts rune r (n bytes long).
func allowed(r rune, n int) bool {
	switch {
	case r == utf8.RuneError && n <= 1:
		return false
	case r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r <= 0x7E || r == 0x85:
		return true
	case r >= 0xA0 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF:
		return true
	}
	return false
}

// parserProblems are the messages of libyaml's parser (not its scanner):
// go.yaml.in/yaml/v3 prints their line counting from 0.
var parserProblems = [...]string{
	"did not find expected node content", "did not find expected key",
	"did not find expected <stream-start>", "did not find expected <document start>",
	"did not find expected '-' indicator", "did not find expected ',' or '}'",
	"did not find expected ',' or ']'", "found undefined tag handle",
	"found incompatible YAML document", "found duplicate %YAML directive",
	"found duplicate %TAG directive",
}

// syntaxError turns a parser error ("yaml: line N: problem") into an
// *Error at the line of the problem, and phrases the problems opctl has
// always phrased its own way. The parser prints the line of the context
// of a problem (where the mapping or the scalar it was reading began),
// counted from 0 for the problems of its parser, and no line for an
// unknown alias: the line of the problem is the first line at which the
// file, cut there, fails with the same error (the parser reads a file
// front to back).
func syntaxError(data []byte, err error) *Error {
	full := err.Error()
	msg := strings.TrimPrefix(full, "yaml: ")
	line, printed := 0, false
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, after, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil {
				line, msg, printed = n, after, true
			}
		}
	}
	if strings.HasPrefix(msg, "exceeded max depth of") {
		// Level 10,000: the line of that level, not of level 65, which
		// only a file under 10,000 levels has (checkLimits).
		return &Error{Kind: TooDeep, Line: max(line, 1), Msg: fmt.Sprintf("nests deeper than %d levels", MaxNesting)}
	}
	if l := firstFailing(data, max(line, 1), full); l > 0 {
		line = l
	} else {
		parser := false
		for _, p := range parserProblems {
			parser = parser || msg == p
		}
		if parser || !printed {
			line++
		}
	}
	switch {
	case msg == "mapping values are not allowed in this context":
		msg = "mapping value is not allowed in this context"
	case msg == "found character that cannot start any token",
		msg == "found a tab character that violates indentation",
		msg == "found a tab character where an indentation space is expected":
		if c := unstartable(data, line); c != "" {
			msg = "found character " + c + " that cannot start any token"
		}
	case strings.HasPrefix(msg, "unknown anchor '") && strings.HasSuffix(msg, "' referenced"):
		name := strings.TrimSuffix(strings.TrimPrefix(msg, "unknown anchor '"), "' referenced")
		msg = fmt.Sprintf("could not find alias %q", name)
	}
	return &Error{Kind: Syntax, Line: line, Msg: msg}
}

// firstFailing is the first line from start at which data cut after that
// line fails to parse with the error text want, or 0 when none does
// within a bounded effort. The lines are tried at start, start+1,
// start+3, start+7, ... until one fails, then halved back to the first
// that fails: a few parses of the part of the file up to the problem.
func firstFailing(data []byte, start int, want string) int {
	var ends []int // ends[k-1]: the offset after line k
	for off := 0; off < len(data); {
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			off = len(data)
		} else {
			off += nl + 1
		}
		ends = append(ends, off)
	}
	// Bytes parsed at most: enough to halve down to the line in a
	// configuration; a broken file of a megabyte gets its context line.
	budget := min(max(4*len(data), 256<<10), 2<<20)
	fails := func(line int) bool {
		end := ends[line-1]
		budget -= end
		err := parseAll(data[:end])
		return err != nil && err.Error() == want
	}
	if start > len(ends) {
		return 0
	}
	lo, step := start-1, 1 // lines up to lo do not fail (or are before start)
	hi := 0
	for line := start; ; line = min(lo+step, len(ends)) {
		if budget < 0 {
			return 0
		}
		if fails(line) {
			hi = line
			break
		}
		if line == len(ends) {
			return 0
		}
		lo, step = line, step*2
	}
	for hi-lo > 1 && budget >= 0 {
		mid := (lo + hi) / 2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// parseAll parses every document of data and returns the first error.
func parseAll(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc Node
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// unstartable is the first character of line that cannot start a YAML
// token (a tab where indentation is read, "@", "`"), quoted, or "".
func unstartable(data []byte, line int) string {
	l := lineOf(data, line)
	if i := bytes.IndexAny(l, "\t@`"); i >= 0 {
		return strconv.QuoteRune(rune(l[i]))
	}
	return ""
}

// lineOf is the text of the 1-based line n of data.
func lineOf(data []byte, n int) []byte {
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(data, '\n')
		if j < 0 {
			return nil
		}
		data = data[j+1:]
	}
	if j := bytes.IndexByte(data, '\n'); j >= 0 {
		data = data[:j]
	}
	return data
}

// checkLimits walks the tree from n (at depth) in document order and
// returns the first limit exceeded: the node that opens level MaxNesting+1,
// or the key that makes a block mapping hold more than MaxKeys keys.
// Aliases are not followed (AliasCount bounds what they add); the parser
// stops at 10,000 levels, which bounds the recursion.
func checkLimits(n *Node, depth int) *Error {
	if n.Kind != MappingNode && n.Kind != SequenceNode {
		return nil
	}
	if depth > MaxNesting {
		return &Error{Kind: TooDeep, Line: n.Line, Msg: fmt.Sprintf("nests deeper than %d levels", MaxNesting)}
	}
	block := n.Kind == MappingNode && n.Style&yaml.FlowStyle == 0
	for i, c := range n.Content {
		if block && i == 2*MaxKeys {
			return &Error{Kind: TooWide, Line: c.Line, Msg: fmt.Sprintf("has a mapping of more than %d keys", MaxKeys)}
		}
		if e := checkLimits(c, depth+1); e != nil {
			return e
		}
	}
	return nil
}
