package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"

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

// Load finds the configuration (see Find; path is the --config value and
// may be empty), reads it and parses it with Parse, expanding ${VAR}s from
// the process environment. Config.Path is set to the file read.
//
// Load does not check kafka.brokers, the MySQL DSNs or SASL credentials,
// because --brokers and --mysql-dsn may supply them: call ValidateKafka and
// ValidateMySQL after applying flags.
func Load(path string) (*Config, error) {
	p, err := Find(path)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
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
func ParseWithEnv(name string, data []byte, lookup LookupFunc) (*Config, error) {
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, ErrorList{{File: name, Msg: "the file is empty"}}
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
