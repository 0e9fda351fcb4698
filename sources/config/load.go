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

	"github.com/opctl-dev/opctl/sources/config/yamlfile"
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
// may nest; a deeper file is refused before it is decoded (docs/config.md).
const MaxNesting = yamlfile.MaxNesting

// MaxKeys is how many keys one block mapping of a file may hold; a file
// with a wider one is refused before it is decoded (docs/config.md): a
// configuration's mappings hold a few dozen.
const MaxKeys = yamlfile.MaxKeys

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
// A file over MaxFileSize bytes is refused before it is parsed; one nested
// deeper than MaxNesting levels, with a block mapping of more than MaxKeys
// keys, or whose aliases add more than MaxAliasValues values is refused
// before it is decoded (sources/config/yamlfile); a UTF-8 byte order mark
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
	body, perr := yamlfile.Parse(data)
	if perr != nil {
		e := &Error{File: name, Line: perr.Line, Msg: perr.Msg}
		switch perr.Kind {
		case yamlfile.TooDeep, yamlfile.TooWide:
			e.Msg = "the file " + perr.Msg + " here; opctl refuses it without parsing it: is this the right file?"
		case yamlfile.SecondDocument:
			e.Msg = "a second YAML document (---) is not supported; keep one configuration per file"
		}
		return nil, ErrorList{e}
	}
	if body == nil {
		return nil, ErrorList{{File: name, Msg: "the file holds no configuration (only comments)"}}
	}
	if body.Kind != yamlfile.MappingNode {
		// Not a configuration at all (an environment, a binary): named, never
		// quoted, since it may hold anything.
		kind := "a single value"
		if body.Kind == yamlfile.SequenceNode {
			kind = "a list"
		}
		return nil, ErrorList{{File: name, Line: body.Line, Msg: fmt.Sprintf("the file holds %s, not a configuration (a mapping of keys such as mysql:, kafka:, pipelines:): is this the right file?", kind)}}
	}

	if line, alias := yamlfile.AliasCount(body, MaxAliasValues, extensionPrefix); line > 0 {
		return nil, ErrorList{{File: name, Line: line, Msg: fmt.Sprintf(
			"aliases make the file hold more than %d values beyond those written (here *%s): write the repeated parts out, or repeat them less", MaxAliasValues, alias)}}
	}

	var c Config
	lines, derrs := yamlfile.Decode(body, &c, extensionPrefix)
	if len(derrs) > 0 {
		errs := make(ErrorList, len(derrs))
		for i, e := range derrs {
			errs[i] = &Error{File: name, Line: e.Line, Msg: e.Msg}
		}
		return nil, errs.asError()
	}

	x := &expander{file: name, lookup: lookup, lines: lines, unset: map[string][]string{}}
	x.walk(reflect.ValueOf(&c).Elem(), "")
	if err := x.errs.asError(); err != nil {
		return nil, err
	}
	m := &meta{file: name, lines: lines, unset: x.unset}
	c.Kafka.Brokers, m.brokerSrc = splitBrokers(c.Kafka.Brokers)
	m.brokers = append([]string(nil), c.Kafka.Brokers...)
	m.dsn, m.writeDSN = c.MySQL.DSN, c.MySQL.WriteDSN
	c.meta = m

	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}
