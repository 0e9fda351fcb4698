package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// EnvConfig is the environment variable naming the config file when
// --config is not given.
const EnvConfig = "OPCTL_CONFIG"

// LocalFile is the config file looked for in the working directory.
const LocalFile = "opctl.yaml"

// NotFoundError is returned by Find and Load when no configuration file
// exists in any of the places looked at.
type NotFoundError struct {
	// Looked lists each place in lookup order, with why it did not apply,
	// e.g. "--config (not given)" or "./opctl.yaml (not found)".
	Looked []string
}

// Error implements error. The message lists the places looked at and how
// to fix it.
func (e *NotFoundError) Error() string {
	var b strings.Builder
	b.WriteString("config: no configuration file found; looked at:\n")
	for _, l := range e.Looked {
		b.WriteString("  ")
		b.WriteString(l)
		b.WriteString("\n")
	}
	b.WriteString("fix: write one with `opctl init --preset settlement` (or fulfilment, skip) " +
		"and save it as ./opctl.yaml, or pass --config FILE, or set $OPCTL_CONFIG")
	return b.String()
}

// Is makes errors.Is(err, fs.ErrNotExist) true for a NotFoundError.
func (e *NotFoundError) Is(target error) bool { return target == fs.ErrNotExist }

// Find returns the configuration file to use, in this order (docs/config.md):
//
//  1. flagPath, the value of --config, when not empty;
//  2. $OPCTL_CONFIG, when set and not empty;
//  3. ./opctl.yaml in the working directory;
//  4. $XDG_CONFIG_HOME/opctl/config.yaml, where XDG_CONFIG_HOME defaults to
//     ~/.config (and, as the XDG spec says, a relative value is ignored).
//
// A file named explicitly by --config or $OPCTL_CONFIG must exist: a typo
// there is an error rather than a silent fall-through to another file. When
// no file is found the error is a *NotFoundError listing every place looked
// at and how to create one.
func Find(flagPath string) (string, error) {
	if flagPath != "" {
		if err := isFile(flagPath); err != nil {
			return "", fmt.Errorf("config: --config %s: %w", flagPath, err)
		}
		return flagPath, nil
	}
	looked := []string{"--config (not given)"}
	if p := os.Getenv(EnvConfig); p != "" {
		if err := isFile(p); err != nil {
			return "", fmt.Errorf("config: $%s=%s: %w (unset it or point it at an existing file)", EnvConfig, p, err)
		}
		return p, nil
	}
	looked = append(looked, "$"+EnvConfig+" (not set)")
	if err := isFile(LocalFile); err == nil {
		return LocalFile, nil
	} else {
		looked = append(looked, "./"+LocalFile+" ("+reason(err)+")")
	}
	if dir := xdgConfigHome(); dir != "" {
		p := filepath.Join(dir, "opctl", "config.yaml")
		if err := isFile(p); err == nil {
			return p, nil
		} else {
			looked = append(looked, p+" ("+reason(err)+")")
		}
	} else {
		looked = append(looked, "$XDG_CONFIG_HOME/opctl/config.yaml (no $XDG_CONFIG_HOME and no home directory)")
	}
	return "", &NotFoundError{Looked: looked}
}

// xdgConfigHome is $XDG_CONFIG_HOME when absolute, else ~/.config, else "".
func xdgConfigHome() string {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return d
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		return filepath.Join(home, ".config")
	}
	return ""
}

// isFile reports nil when p exists and is not a directory.
func isFile(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fs.ErrNotExist
		}
		return err
	}
	if st.IsDir() {
		return errors.New("is a directory, not a file")
	}
	return nil
}

func reason(err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return "not found"
	}
	return err.Error()
}

// MaxFileSize is the largest configuration file opctl reads, in bytes (1 MiB);
// a larger one is refused before it is read whole.
const MaxFileSize = 1 << 20

// MaxNesting is how deeply the mappings and lists of a configuration file
// may nest; a deeper file is refused before it is parsed (docs/config.md).
const MaxNesting = 64

// MaxAliasValues is how many values (keys, scalars, list items) the
// aliases of a configuration file (*name, <<: *name) may add to those
// written: every alias is decoded as a copy of what it names, so aliases of
// aliases multiply (a 2.6 KB file made 90,000 steps, 36 s and 857 MB).
const MaxAliasValues = 100_000

// OpenRegular opens path for reading when it is a regular file (a symlink
// to one included), and refuses anything else (a named pipe, a device, a
// socket, a directory) with a *NotRegularError, without an open that can
// block: a named pipe is opened non-blocking, then its type is read from
// the open file. A configuration, a runbook and a plan file are read this
// way (docs/config.md "Where opctl looks").
func OpenRegular(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = &NotRegularError{Path: path, Mode: st.Mode()}
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// NotRegularError is a file opctl reads that is not a regular file.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

// Error names the file and what it is.
func (e *NotRegularError) Error() string {
	what := "not a regular file"
	switch t := e.Mode.Type(); {
	case t&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case t&fs.ModeSocket != 0:
		what = "a socket"
	case t&fs.ModeDevice != 0:
		what = "a device"
	case t&fs.ModeDir != 0:
		what = "a directory"
	}
	return fmt.Sprintf("%s is %s, not a regular file: opctl reads only files (save it to a file first)", e.Path, what)
}

// readFile reads the configuration file p, refusing one over MaxFileSize
// without reading more than that, and one that is not a regular file
// (OpenRegular).
func readFile(p string) ([]byte, error) {
	f, st, err := OpenRegular(p)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	size := int64(bytes.MinRead)
	if st.Size() > MaxFileSize {
		return nil, ErrorList{tooBig(p, st.Size())}
	}
	size += st.Size()
	var buf bytes.Buffer
	buf.Grow(int(size))
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxFileSize+1)); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if buf.Len() > MaxFileSize {
		return nil, ErrorList{tooBig(p, -1)}
	}
	return buf.Bytes(), nil
}

// tooBig is the error of a file over MaxFileSize (size < 0: unknown).
func tooBig(name string, size int64) *Error {
	have := "more than 1 MiB"
	if size >= 0 {
		have = fmt.Sprintf("%.1f MiB (%d bytes)", float64(size)/(1<<20), size)
	}
	return &Error{File: name, Msg: fmt.Sprintf("the file holds %s; a configuration may be at most 1 MiB (%d bytes): is this the right file?", have, MaxFileSize)}
}

// Load finds the configuration (see Find; path is the --config value and
// may be empty), reads it (refusing a file over MaxFileSize bytes without
// reading it whole) and parses it with Parse, expanding ${VAR}s from the
// process environment. Config.Path is set to the file read.
//
// Load does not check kafka.brokers, the MySQL DSNs or SASL credentials,
// because --brokers and --mysql-dsn may supply them: call ValidateKafka and
// ValidateMySQL after applying flags.
func Load(path string) (*Config, error) {
	p, err := Find(path)
	if err != nil {
		return nil, err
	}
	data, err := readFile(p)
	if err != nil {
		return nil, err
	}
	c, err := Parse(p, data)
	if err != nil {
		return nil, err
	}
	c.Path = p
	return c, nil
}

// Parse parses and validates a configuration held in memory, expanding
// ${VAR}s from the process environment. name is used in messages
// ("config NAME:LINE: ..."); Config.Path is left empty.
func Parse(name string, data []byte) (*Config, error) {
	return ParseWithEnv(name, data, os.LookupEnv)
}

// ParseWithEnv is Parse with ${VAR}s looked up by lookup instead of the
// process environment (nil means no variable is set).
//
// The steps are: strict decode (every unknown key and every type mismatch is
// reported with its line; misspelled keys get a suggestion), ${VAR}
// expansion of every string value, validation of everything except
// kafka.brokers and the MySQL DSNs (see ValidateKafka, ValidateMySQL), and
// finally defaults (see Validate). On failure the error is an ErrorList
// holding every problem, sorted by line.
//
// Before it is parsed, a file over MaxFileSize bytes or nested deeper than
// MaxNesting levels is refused (see nesting), and before it is decoded, one
// whose aliases add more than MaxAliasValues values; a UTF-8 byte order mark
// is skipped. No message holds a raw control character (docs/config.md
// "What is checked when the file loads").
func ParseWithEnv(name string, data []byte, lookup LookupFunc) (*Config, error) {
	c, err := parse(name, data, lookup)
	if err != nil {
		var list ErrorList
		if errors.As(err, &list) {
			for _, e := range list {
				e.Msg = printable(redactSecrets(e.Msg))
			}
		}
		return nil, err
	}
	return c, nil
}

func parse(name string, data []byte, lookup LookupFunc) (*Config, error) {
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	if len(data) > MaxFileSize {
		return nil, ErrorList{tooBig(name, int64(len(data)))}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, ErrorList{{File: name, Msg: "the file is empty"}}
	}
	if line, why := Prescan(data); line > 0 {
		return nil, ErrorList{{File: name, Line: line, Msg: "the file " + why + " here; opctl refuses it without parsing it: is this the right file?"}}
	}
	file, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey()) // shape reports repeats with both lines
	if err != nil {
		return nil, ErrorList{yamlError(name, err)}
	}
	var body ast.Node
	for _, d := range file.Docs {
		if d == nil || d.Body == nil {
			continue
		}
		if _, ok := d.Body.(*ast.CommentGroupNode); ok {
			continue
		}
		if body == nil {
			body = d.Body
		} else {
			return nil, ErrorList{{File: name, Line: nodeLine(d.Body), Msg: "a second YAML document (---) is not supported; keep one configuration per file"}}
		}
	}
	if body == nil {
		return nil, ErrorList{{File: name, Msg: "the file holds no configuration (only comments)"}}
	}
	if isScalar(body) || body.Type() == ast.SequenceType {
		// Not a configuration at all (an environment, a binary): named, never
		// quoted, since it may hold anything.
		kind := "a list"
		if isScalar(body) {
			kind = "a single value"
		}
		return nil, ErrorList{{File: name, Line: nodeLine(body), Msg: fmt.Sprintf("the file holds %s, not a configuration (a mapping of keys such as mysql:, kafka:, pipelines:): is this the right file?", kind)}}
	}

	if line, alias := aliasExpansion(body, MaxAliasValues); line > 0 {
		return nil, ErrorList{{File: name, Line: line, Msg: fmt.Sprintf(
			"aliases make the file hold more than %d values beyond those written (here *%s): write the repeated parts out, or repeat them less", MaxAliasValues, alias)}}
	}

	sh := newShape(name)
	sh.value(body, reflect.TypeOf(Config{}), "")
	if err := sh.errs.asError(); err != nil {
		return nil, err
	}

	var c Config
	// Decoded from the tree shape just walked: parsing the bytes again
	// would double the cost of every command's start.
	if err := yaml.NodeToValue(body, &c, yaml.Strict(), yaml.AllowFieldPrefixes(extensionPrefix)); err != nil {
		return nil, ErrorList{yamlError(name, err)}
	}

	x := &expander{file: name, lookup: lookup, raw: sh.raw, lines: sh.lines, unset: map[string][]string{}}
	x.walk(reflect.ValueOf(&c).Elem(), "")
	if err := x.errs.asError(); err != nil {
		return nil, err
	}
	m := &meta{file: name, lines: sh.lines, unset: x.unset}
	c.Kafka.Brokers, m.brokerSrc = splitBrokers(c.Kafka.Brokers)
	m.brokers = append([]string(nil), c.Kafka.Brokers...)
	m.dsn, m.writeDSN = c.MySQL.DSN, c.MySQL.WriteDSN
	c.meta = m

	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// yamlError turns a goccy error into an *Error with the line of its token.
func yamlError(name string, err error) *Error {
	var ye yaml.Error
	if errors.As(err, &ye) {
		line := 0
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			line = tk.Position.Line
		}
		return &Error{File: name, Line: line, Msg: ye.GetMessage()}
	}
	return &Error{File: name, Msg: err.Error()}
}

// nesting measures how deeply the mappings and lists of a YAML file nest,
// over its bytes and without parsing it, and returns the line where the
// depth first exceeds limit, or 0. It exists because the YAML parser's cost
// grows with the square of the depth (a 40,000-deep file takes gigabytes):
// a file deeper than any configuration is refused before the parser sees
// it, in one pass whose memory is bounded by limit.
//
// The depth at a point is the number of block collections open there (a
// stack of the columns of their "key:", "- " and "? " indicators) plus the
// number of open flow collections ([ and {). What is a token follows the
// tokenizer of the parser (github.com/goccy/go-yaml's scanner), so that
// quoted and block scalars, comments, and brackets or dashes inside plain
// text count as the parser counts them; a test checks, for any input, that
// this is never less than the depth the parser builds.
func nesting(data []byte, limit int) int {
	s := nestScan{src: data, line: 1, col: 1, first: true, limit: limit}
	s.run()
	return s.deep
}

// MaxKeys is how many keys one block mapping of a file may hold; a file
// with a wider one is refused before it is parsed (docs/config.md). The
// YAML parser's cost grows with the square of a block mapping's keys (one
// mapping of 96,000 keys, inside MaxFileSize, took 23 s and 386 MB); a
// configuration's mappings hold a few dozen.
const MaxKeys = 256

// Prescan is the check made over the bytes of a YAML file (a
// configuration, a runbook) before it is parsed, in one pass (see
// nesting): the line where it first nests deeper than MaxNesting levels or
// where a block mapping first holds more than MaxKeys keys, and what it
// does there ("nests deeper than 64 levels"); or 0 and "".
func Prescan(data []byte) (line int, why string) {
	s := nestScan{src: data, line: 1, col: 1, first: true, limit: MaxNesting, maxKeys: MaxKeys}
	s.run()
	switch {
	case s.deep > 0:
		return s.deep, fmt.Sprintf("nests deeper than %d levels", MaxNesting)
	case s.wide > 0:
		return s.wide, fmt.Sprintf("has a mapping of more than %d keys", MaxKeys)
	}
	return 0, ""
}

// nestScan is the state of nesting: the position, the parts of the
// tokenizer's state that decide what a character is, and the collections
// open.
type nestScan struct {
	src   []byte
	i     int // byte offset
	line  int // 1-based
	col   int // 1-based, in runes as the tokenizer counts them
	prev  rune
	limit int
	deep  int // the line where the depth exceeded limit, or 0
	// maxKeys bounds the keys of a block mapping (0: no bound); wide is
	// the line where one exceeded it, or 0.
	maxKeys, wide int

	first     bool // only spaces and tabs so far on this line
	indentNum int  // spaces before the first character of the line
	indent    int  // indentKeep, indentUp or indentDown at the line's first character
	lastDelim int  // the column of the last key, "- " or "? " (the tokenizer's lastDelimColumn)

	pending    bool // plain text since the last token (the tokenizer's buffer)
	pendingCol int  // the column where it started
	lastTokCol int  // the column of the last token
	lastValue  bool // the last token is a ":" mapping value
	lastQuote  bool // the last token is a quoted scalar

	anchor, alias, directive bool

	// A tag with nothing after it on its line takes the next node for its
	// value, however indented: tagPending until the line ends, then
	// dangling until the next node, keyAfterTag while that node is a key.
	tagPending, dangling, keyAfterTag bool

	// The column where the node being read started on line nodeLine (its
	// first property, alias, quote or text), 0 after an indicator: the
	// parser places a key there.
	nodeCol, nodeLine int

	block      bool // in a block scalar (| or > or a folded plain scalar)
	blockFirst int  // the column of its first content line, 0 until seen

	seqN, mapN int // open flow lists and mappings, as the tokenizer counts them
	flow       int // open flow collections
	stack      []nestLevel
}

// nestLevel is an open block collection: the column and line of its
// indicator, whether it is a list, whether its value is still empty on
// that line, and whether it is the value of a tag, which only a sibling at
// its column ends.
type nestLevel struct {
	col, line          int
	seq, empty, tagged bool
	keys               int // the entries of its collection so far, this one included
}

const (
	indentKeep = iota
	indentUp
	indentDown
)

func (s *nestScan) flowMode() bool { return s.seqN > 0 || s.mapN > 0 }

// at is the rune at byte offset i (utf8.RuneError for invalid UTF-8, one
// byte at a time, as the tokenizer's []rune conversion counts it).
func (s *nestScan) at(i int) (rune, int) {
	if i >= len(s.src) {
		return 0, 0
	}
	if c := s.src[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRune(s.src[i:])
}

// next is the rune after the current one, or 0 at the end; end reports
// whether there is none.
func (s *nestScan) next() (r rune, end bool) {
	_, n := s.at(s.i)
	r, m := s.at(s.i + n)
	return r, m == 0
}

// step moves past the current rune, advancing the column when col is set.
func (s *nestScan) step(col bool) {
	r, n := s.at(s.i)
	s.i += n
	s.prev = r
	if col {
		s.col++
	}
}

// newline moves past a line break (\r\n, \r or \n) to the next line.
func (s *nestScan) newline() {
	if s.src[s.i] == '\r' && s.i+1 < len(s.src) && s.src[s.i+1] == '\n' {
		s.i++
	}
	s.i++
	s.prev = '\n'
	s.line++
	s.col = 1
	s.first = true
	s.indentNum = 0
	s.anchor, s.alias, s.directive = false, false, false
}

// flush ends the plain text pending, as a token.
func (s *nestScan) flush() {
	if s.pending {
		s.pending = false
		s.token(s.pendingCol)
	}
}

// token records a token starting at col.
func (s *nestScan) token(col int) {
	s.lastTokCol = col
	s.lastValue, s.lastQuote = false, false
}

// push opens a block collection whose indicator is at col: it closes those
// it ends (deeper ones, and a sibling at the same column) first. At the
// same column, a list is the value of a key, and the parser also takes a
// key for the value of a "-" with nothing after it on its line. The value
// of a dangling tag (or the key after one: key) closes nothing.
func (s *nestScan) push(col int, seq, key bool) {
	if s.flowMode() {
		return
	}
	tagged := s.dangling || key && s.keyAfterTag
	keys := 1 // a sibling closed here is the previous entry of this collection
	for !tagged && len(s.stack) > 0 {
		top := s.stack[len(s.stack)-1]
		if top.col < col || top.col == col && top.seq != seq && (seq || top.empty) {
			break
		}
		if top.col == col && top.seq == seq {
			keys = top.keys + 1
		}
		if top.tagged {
			if top.col == col && top.seq == seq {
				s.stack = s.stack[:len(s.stack)-1]
				tagged = true
			}
			break
		}
		s.stack = s.stack[:len(s.stack)-1]
	}
	s.stack = append(s.stack, nestLevel{col: col, line: s.line, seq: seq, empty: true, tagged: tagged, keys: keys})
	if !seq && s.maxKeys > 0 && keys > s.maxKeys && s.wide == 0 {
		s.wide = s.line
	}
	s.dangling, s.keyAfterTag = false, false
	s.nodeCol = 0
	s.check()
}

// node records that a node starts at col, unless one started earlier on
// the line.
func (s *nestScan) node(col int) {
	if s.nodeCol == 0 || s.nodeLine != s.line {
		s.nodeCol, s.nodeLine = col, s.line
	}
}

// content records a node starting: a value after the last indicator on its
// line, or the node a dangling tag takes (when it turns out to be a key,
// push sees keyAfterTag).
func (s *nestScan) content() {
	if n := len(s.stack); n > 0 && s.stack[n-1].line == s.line {
		s.stack[n-1].empty = false
	}
	s.keyAfterTag, s.dangling, s.tagPending = s.dangling, false, false
}

func (s *nestScan) check() {
	if len(s.stack)+s.flow > s.limit && s.deep == 0 {
		s.deep = s.line
	}
}

// repeat counts the consecutive bytes c from the current one.
func (s *nestScan) repeat(c byte) int {
	n := 0
	for s.i+n < len(s.src) && s.src[s.i+n] == c {
		n++
	}
	return n
}

// blankOrEnd reports whether r (a next rune) is a space, a tab, a line
// break or the end.
func blankOrEnd(r rune) bool { return r == 0 || r == ' ' || r == '\t' || r == '\n' || r == '\r' }

func (s *nestScan) run() {
	for s.i < len(s.src) && s.deep == 0 && s.wide == 0 {
		c, _ := s.at(s.i)
		// The indentation state, decided by the first character of a line
		// that is not a space, a tab or a line break.
		switch {
		case s.first && (c == '\n' || c == '\r'):
		case s.first && c == ' ':
			s.indentNum++
		case s.first && c == '\t':
		case s.first:
			if s.lastDelim != 0 {
				if s.lastDelim < s.col {
					s.indent = indentUp
				} else {
					s.indent = indentDown
				}
			}
			s.first = false
		default:
			s.indent = indentKeep
		}
		if s.indent == indentDown {
			s.flush()
		}
		if s.block {
			if s.indent == indentDown {
				s.block = false
			} else {
				s.blockContent(c)
				continue
			}
		}
		if s.special(c) {
			continue
		}
		if c == '\n' || c == '\r' {
			if s.i+1 >= len(s.src) || s.anchor || s.alias || s.directive {
				s.flush()
			}
			if s.tagPending {
				s.tagPending, s.dangling = false, true
			}
			s.newline()
			continue
		}
		switch c {
		case ' ':
			if !s.first && (s.directive || s.anchor || s.alias) {
				s.flush()
				s.anchor, s.alias = false, false
			}
			s.step(true)
			continue
		case '\t':
			if s.pending && s.lastDelim == 0 || s.lastDelim < s.col {
				s.indentNum++
				s.step(false)
				continue
			}
			s.step(true)
			continue
		}
		if !s.pending {
			s.pending = true
			s.pendingCol = s.col
			s.node(s.col)
			s.content()
		}
		s.step(true)
	}
}

// blockContent moves over one rune of a block scalar.
func (s *nestScan) blockContent(c rune) {
	switch {
	case c == '\n' || c == '\r':
		s.newline()
		if s.docMarkerAhead() {
			s.block = false
			s.pending = false
		}
	case s.first && c == ' ' || c == '\t':
		s.step(true)
	default:
		if s.blockFirst == 0 {
			s.blockFirst = s.col
		}
		if s.blockFirst > 1 {
			s.lastDelim = s.blockFirst - 1
		}
		s.step(true)
	}
}

// docMarkerAhead reports whether the line at the current offset starts with
// "---" or "..." followed by a blank or the end.
func (s *nestScan) docMarkerAhead() bool {
	rest := s.src[s.i:]
	if len(rest) < 3 || !bytes.HasPrefix(rest, []byte("---")) && !bytes.HasPrefix(rest, []byte("...")) {
		return false
	}
	return len(rest) == 3 || rest[3] == ' ' || rest[3] == '\t' || rest[3] == '\n' || rest[3] == '\r'
}

// special handles a character that may be an indicator, and reports
// whether it was one.
func (s *nestScan) special(c rune) bool {
	col := s.col
	switch c {
	case '{':
		if s.pending && !s.flowMode() {
			return false
		}
		s.flush()
		s.mapN++
		s.open(col)
	case '}':
		if s.mapN <= 0 {
			return false
		}
		s.flush()
		s.mapN--
		s.close(col)
	case '[':
		if s.pending && !s.flowMode() {
			return false
		}
		s.flush()
		s.seqN++
		s.open(col)
	case ']':
		if s.pending && s.seqN <= 0 {
			return false
		}
		s.flush()
		s.seqN--
		s.close(col)
	case ',':
		if !s.flowMode() {
			return false
		}
		s.flush()
		s.token(col)
		s.step(true)
	case '.':
		if s.indentNum != 0 || col != 1 || s.repeat('.') != 3 {
			return false
		}
		s.flush()
		s.token(col)
		s.stepN(3)
	case '<':
		if !s.mergeKey() {
			return false
		}
		s.lastDelim = col
		s.pending = false
		s.token(col)
		s.stepN(2)
	case '-':
		switch {
		case s.indentNum == 0 && col == 1 && s.repeat('-') == 3 && (s.i+3 == len(s.src) || blankOrEnd(rune(s.src[s.i+3]))):
			s.flush()
			s.token(col)
			s.stepN(3)
			s.lastDelim, s.indentNum = 0, 0
			s.stack = s.stack[:0]
			s.tagPending, s.dangling, s.keyAfterTag = false, false, false
		case s.pending && s.indent == indentUp:
			// A "-" starting a more indented line of plain text: the
			// tokenizer reads the rest as a folded scalar.
			s.block, s.blockFirst = true, col
			s.step(true)
		case !s.pending && blankOrEnd(s.nextRune()):
			s.flush()
			s.token(col)
			s.lastDelim = col
			s.push(col, true, false)
			s.step(true)
		default:
			return false
		}
	case ':':
		if s.directive || s.anchor || s.alias {
			return false
		}
		nc, end := s.next()
		if s.mapN <= 0 && !end && nc != ' ' && nc != '\t' && nc != '\n' && nc != '\r' || s.mapN > 0 && (nc == '/' || s.lastValue) {
			return false
		}
		key := s.lastTokCol
		if s.pending {
			key = s.pendingCol
			s.lastDelim = key
		} else if s.lastQuote {
			s.lastDelim = key
		}
		if s.nodeCol > 0 && s.nodeLine == s.line {
			key = min(key, s.nodeCol)
		}
		s.flush()
		s.push(key, false, true)
		s.token(col)
		s.lastValue = true
		s.step(true)
	case '|', '>':
		if s.pending {
			return false
		}
		s.content()
		s.header(col)
	case '!':
		if s.pending || s.directive {
			return false
		}
		s.node(col)
		s.tag(col)
	case '%':
		if s.pending || s.indentNum != 0 {
			return false
		}
		s.flush()
		s.token(col)
		s.directive = true
		s.step(true)
	case '?':
		if nc := s.nextRune(); s.pending || nc != ' ' && nc != '\t' {
			return false
		}
		s.token(col)
		s.lastDelim = col
		s.push(col, false, false)
		s.step(true)
	case '&', '*':
		if s.pending {
			return false
		}
		s.flush()
		s.node(col)
		s.token(col)
		s.anchor, s.alias = c == '&', c == '*'
		if s.alias {
			s.content()
		}
		s.step(true)
	case '#':
		if s.pending && s.prev != ' ' && s.prev != '\t' && s.prev != '\n' && s.prev != '\r' {
			return false
		}
		s.flush()
		s.token(col)
		for s.i < len(s.src) && s.src[s.i] != '\n' && s.src[s.i] != '\r' {
			s.step(true)
		}
	case '\'', '"':
		if s.pending {
			return false
		}
		s.node(col)
		s.content()
		s.quoted(byte(c))
		s.token(col)
		s.lastQuote = true
	default:
		return false
	}
	return true
}

// nextRune is the rune after the current one, or 0 at the end.
func (s *nestScan) nextRune() rune {
	r, _ := s.next()
	return r
}

// stepN moves past n runes of the current line.
func (s *nestScan) stepN(n int) {
	for range n {
		s.step(true)
	}
}

// open and close are a flow collection's [ or { and its ] or }.
func (s *nestScan) open(col int) {
	s.node(col)
	s.content()
	s.token(col)
	s.flow++
	s.check()
	s.step(true)
}

func (s *nestScan) close(col int) {
	s.token(col)
	if s.flow > 0 {
		s.flow--
	}
	s.step(true)
}

// mergeKey reports whether a "<<" merge key starts here: exactly two "<",
// spaces, and a ":" followed by a space or a line break.
func (s *nestScan) mergeKey() bool {
	if s.repeat('<') != 2 {
		return false
	}
	for j := s.i + 2; j < len(s.src); j++ {
		c := s.src[j]
		if c == ' ' {
			continue
		}
		if c != ':' {
			return false
		}
		if j+1 < len(s.src) && (s.src[j+1] == ' ' || s.src[j+1] == '\n' || s.src[j+1] == '\r') {
			return true
		}
	}
	return false
}

// header moves past the header line of a | or > block scalar, whose content
// follows: the lines indented more than its key (or than an explicit
// indentation indicator says).
func (s *nestScan) header(col int) {
	end := s.i + 1
	for end < len(s.src) && s.src[end] != '\n' && s.src[end] != '\r' {
		end++
	}
	opt := strings.TrimRight(string(s.src[s.i+1:end]), " ")
	if k := strings.IndexByte(opt, '#'); k > 0 {
		opt = opt[:k]
	}
	opt = strings.TrimRight(opt, " \t")
	opt = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(opt, "-"), "+"), "-"), "+")
	if col == 1 {
		s.lastDelim = 1
	}
	s.block, s.blockFirst = true, 0
	if len(opt) == 1 && opt[0] >= '1' && opt[0] <= '9' {
		s.blockFirst = s.lastDelim + int(opt[0]-'0')
	}
	s.indent = indentKeep
	s.pending = false
	s.token(col)
	for s.i < end {
		s.step(true)
	}
	if s.i < len(s.src) {
		s.newline()
	}
}

// tag moves past a !tag: to a space (included), a line break, or a "," in
// a flow collection.
func (s *nestScan) tag(col int) {
	s.step(false)
	for s.i < len(s.src) {
		c := s.src[s.i]
		if c == ' ' {
			s.step(true)
			break
		}
		if c == '\n' || c == '\r' || c == ',' && s.flowMode() || c == '{' || c == '}' {
			break // "{" and "}" make the file invalid
		}
		s.step(true)
	}
	s.pending = false
	s.token(col)
	s.tagPending = true
}

// quoted moves past a '...' or "..." scalar, which may span lines.
func (s *nestScan) quoted(q byte) {
	s.step(true)
	for s.i < len(s.src) {
		c := s.src[s.i]
		switch {
		case c == '\n' || c == '\r':
			s.newline()
			continue
		case c == q && q == '\'' && s.i+1 < len(s.src) && s.src[s.i+1] == '\'':
			s.stepN(2)
			continue
		case c == q:
			s.step(true)
			return
		case c == '\\' && q == '"':
			s.escape()
			continue
		}
		s.step(true)
	}
}

// escape moves past a \ escape of a double-quoted scalar and as many runes
// after it as the tokenizer takes (\x: 2 more, \u: 4, or 10 for a
// surrogate pair, \U: 8), which may include the closing quote.
func (s *nestScan) escape() {
	s.step(true)
	c, _ := s.at(s.i)
	n := 1
	switch {
	case c == 'x' && s.runesFrom(3):
		n = 3
	case c == 'u' && s.runesFrom(5):
		n = 5
		if code := s.hexAt(1); code >= 0xD800 && code <= 0xDBFF && s.runesFrom(11) {
			if r5, r6 := s.runeAt(5), s.runeAt(6); r5 == '\\' && r6 == 'u' {
				if low := s.hexAt(7); low >= 0xDC00 && low <= 0xDFFF {
					n = 11
				}
			}
		}
	case c == 'U' && s.runesFrom(9):
		n = 9
	}
	for range n {
		if s.i >= len(s.src) {
			return
		}
		if c := s.src[s.i]; c == '\n' || c == '\r' {
			s.line++
		}
		s.step(true)
	}
}

// runesFrom reports whether at least n runes follow the current offset,
// the current one included.
func (s *nestScan) runesFrom(n int) bool {
	i := s.i
	for range n {
		_, m := s.at(i)
		if m == 0 {
			return false
		}
		i += m
	}
	return true
}

// runeAt is the k-th rune after the current one (0: the current one).
func (s *nestScan) runeAt(k int) rune {
	i := s.i
	for range k {
		_, m := s.at(i)
		i += m
	}
	r, _ := s.at(i)
	return r
}

// hexAt is the value the tokenizer gives the 4 runes from the k-th one as
// hex digits (whatever they are).
func (s *nestScan) hexAt(k int) int {
	sum := 0
	for j := range 4 {
		b := s.runeAt(k + j)
		var d int
		switch {
		case b >= 'A' && b <= 'F':
			d = int(b) - 'A' + 10
		case b >= 'a' && b <= 'f':
			d = int(b) - 'a' + 10
		default:
			d = int(b) - '0'
		}
		sum += d << (uint(3-j) * 4)
	}
	return sum
}

// aliasExpansion counts the values of the tree n with every alias replaced
// by a copy of what it names, as the decoder makes them, and returns the
// line of the alias where they exceed the values written by more than
// limit, and its name; or 0. Aliases under the ignored x- keys do not
// count (their anchors do, where used). Anchors precede their aliases, so one walk
// with the size of each anchor's value remembered suffices; the counts
// saturate, however many times aliases multiply.
func aliasExpansion(n ast.Node, limit int) (int, string) {
	x := aliasCount{sizes: map[string]int{}, limit: limit}
	x.size(n)
	return x.line, x.name
}

type aliasCount struct {
	sizes       map[string]int // anchor → the values of its copy, -1 while being counted
	added       int            // values the aliases add so far
	ignored     int            // > 0 under an x- key
	limit, line int
	name        string
}

// size is the number of values of n with its aliases expanded, at most
// limit+2 (enough to know that one alias of it adds too many).
func (x *aliasCount) size(n ast.Node) int {
	if n == nil || x.line > 0 {
		return 0
	}
	sum := func(parts ...ast.Node) int {
		t := 1
		for _, p := range parts {
			t = min(t+x.size(p), x.limit+2)
		}
		return t
	}
	switch v := n.(type) {
	case *ast.DocumentNode:
		if v != nil {
			return x.size(v.Body)
		}
	case *ast.MappingNode:
		if v != nil {
			parts := make([]ast.Node, 0, len(v.Values))
			for _, mv := range v.Values {
				if mv != nil {
					parts = append(parts, mv)
				}
			}
			return sum(parts...)
		}
	case *ast.MappingValueNode:
		if v != nil {
			if k, ok := v.Key.(*ast.StringNode); ok && k != nil && strings.HasPrefix(k.Value, extensionPrefix) {
				// Ignored, never decoded: only its anchors count, where
				// they are used.
				x.ignored++
				defer func() { x.ignored-- }()
			}
			return sum(v.Key, v.Value)
		}
	case *ast.SequenceNode:
		if v != nil {
			return sum(v.Values...)
		}
	case *ast.TagNode:
		if v != nil {
			return x.size(v.Value)
		}
	case *ast.MappingKeyNode:
		if v != nil {
			return x.size(v.Value)
		}
	case *ast.AnchorNode:
		if v != nil && v.Name != nil && v.Name.GetToken() != nil {
			name := v.Name.GetToken().Value
			x.sizes[name] = -1
			t := x.size(v.Value)
			x.sizes[name] = t
			return t
		}
	case *ast.AliasNode:
		if v != nil && v.Value != nil && v.Value.GetToken() != nil {
			name := v.Value.GetToken().Value
			t := x.sizes[name]
			if t <= 0 {
				return 1 // unknown, or its own anchor's value: the decoder refuses it
			}
			if x.ignored > 0 {
				return t
			}
			x.added = min(x.added+t-1, x.limit+1)
			if x.added > x.limit {
				x.line, x.name = nodeLine(v), name
			}
			return t
		}
	}
	return 1
}
