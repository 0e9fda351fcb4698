package sop

import (
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources/config"
)

// builtin holds the built-in runbooks (docs/runbooks.md "Built-ins").
//
//go:embed runbooks/*.yaml
var builtin embed.FS

// BuiltinPrefix starts the Source of a built-in runbook.
const BuiltinPrefix = "builtin:"

// Library is every runbook opctl knows: the built-ins, and the team's from
// sop.dir, which add runbooks and replace a built-in of the same name.
type Library struct {
	// Runbooks are sorted by name.
	Runbooks []*Runbook
	// Skipped says, for each *.yaml or *.yml entry of sop.dir that was not
	// read as a runbook, which and why (a link out of sop.dir, a
	// directory, a named pipe).
	Skipped []string
}

// Builtins parses the built-in runbooks.
func Builtins() (*Library, error) { return Load("") }

// Load reads the built-in runbooks and, when dir is not empty, every
// *.yaml and *.yml file of dir. A runbook of dir replaces the built-in of
// its name; two files of dir with one name are an error. Every problem of
// every file is reported at once, as an ErrorList.
func Load(dir string) (*Library, error) {
	byName := map[string]*Runbook{}
	var errs ErrorList
	var skipped []string
	ents, err := fs.ReadDir(builtin, "runbooks")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		data, err := fs.ReadFile(builtin, "runbooks/"+e.Name())
		if err != nil {
			return nil, err
		}
		rb, err := Parse(BuiltinPrefix+e.Name(), data)
		if err != nil {
			return nil, fmt.Errorf("a built-in runbook does not parse (a bug): %w", err)
		}
		byName[rb.Name] = rb
	}
	if dir != "" {
		files, skip, err := teamFiles(dir)
		if err != nil {
			return nil, err
		}
		skipped = skip
		team := map[string]string{}
		for _, path := range files {
			rb, err := ReadFile(path)
			var list ErrorList
			if errors.As(err, &list) {
				errs = append(errs, list...)
				continue
			}
			if err != nil {
				return nil, err
			}
			if prev, dup := team[rb.Name]; dup {
				errs = append(errs, &Error{File: path, Msg: fmt.Sprintf("runbook %q is also defined in %s: one file per name", rb.Name, prev)})
				continue
			}
			team[rb.Name] = path
			byName[rb.Name] = rb
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	l := &Library{Skipped: skipped}
	for _, rb := range byName {
		l.Runbooks = append(l.Runbooks, rb)
	}
	sort.Slice(l.Runbooks, func(i, j int) bool { return l.Runbooks[i].Name < l.Runbooks[j].Name })
	return l, nil
}

// teamFiles lists the runbook files of dir, sorted: its *.yaml and *.yml
// entries that are regular files, or symbolic links to a regular file
// inside dir (a Kubernetes ConfigMap mounts each key as a link into a
// hidden directory of the mount). Every other such entry is skipped, and
// said in skipped.
func teamFiles(dir string) (files, skipped []string, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("sop.dir %s: %w", dir, err)
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("sop.dir %s: %w", dir, err)
	}
	if root, err = filepath.Abs(root); err != nil {
		return nil, nil, fmt.Errorf("sop.dir %s: %w", dir, err)
	}
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, ".yaml") && !strings.HasSuffix(n, ".yml") {
			continue
		}
		path := filepath.Join(dir, n)
		if why := teamFile(root, path, e.Type()); why != "" {
			skipped = append(skipped, fmt.Sprintf("%s: %s", path, why))
			continue
		}
		files = append(files, path)
	}
	return files, skipped, nil
}

// teamFile is why the entry path of sop.dir (resolved: root), of type t,
// is not a runbook file, or "".
func teamFile(root, path string, t fs.FileMode) string {
	if t.IsRegular() {
		return ""
	}
	if t&fs.ModeSymlink == 0 {
		return "not a regular file (" + t.String() + "), skipped"
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Sprintf("a symbolic link that leads nowhere (%v), skipped", err)
	}
	if real, err = filepath.Abs(real); err != nil {
		return err.Error()
	}
	if !strings.HasPrefix(real, root+string(filepath.Separator)) {
		return fmt.Sprintf("a symbolic link to %s, outside sop.dir, skipped (copy the file into sop.dir)", real)
	}
	if fi, err := os.Stat(real); err != nil || !fi.Mode().IsRegular() {
		return fmt.Sprintf("a symbolic link to %s, not a regular file, skipped", real)
	}
	return ""
}

// ReadFile reads and parses one runbook file, refusing one that is not a
// regular file (config.OpenRegular: never an open that blocks) and one
// over MaxFileSize bytes without reading it whole.
func ReadFile(path string) (*Runbook, error) {
	f, _, err := config.OpenRegular(path)
	var nr *config.NotRegularError
	if errors.As(err, &nr) {
		return nil, ErrorList{{File: path, Msg: strings.TrimPrefix(nr.Error(), path+" ")}}
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("runbook %s: %w", path, err)
	}
	return Parse(path, data)
}

// Get is the runbook called name.
func (l *Library) Get(name string) (*Runbook, bool) {
	for _, rb := range l.Runbooks {
		if rb.Name == name {
			return rb, true
		}
	}
	return nil, false
}

// Names are the runbooks' names.
func (l *Library) Names() []string {
	out := make([]string, len(l.Runbooks))
	for i, rb := range l.Runbooks {
		out[i] = rb.Name
	}
	return out
}

// For is the runbook for one operation whose verdict is code: the runbook
// named after the verdict (DUPLICATE_EFFECT: duplicate-effect) when it
// lists it, else the first by name that lists it. Runbooks that run on
// reconcile's targets are not for one operation.
func (l *Library) For(code inspect.Code) (*Runbook, bool) {
	if rb, ok := l.Get(RunbookName(code)); ok && !rb.Mass() && rb.listed(code) {
		return rb, true
	}
	for _, rb := range l.Runbooks {
		if !rb.Mass() && rb.listed(code) {
			return rb, true
		}
	}
	return nil, false
}

// RunbookName is the name of the built-in runbook of a verdict: lower
// case, with dashes (STATE_BEHIND: state-behind).
func RunbookName(code inspect.Code) string {
	return strings.ReplaceAll(strings.ToLower(string(code)), "_", "-")
}

func (r *Runbook) listed(code inspect.Code) bool {
	for _, v := range r.Verdicts {
		if v == code {
			return true
		}
	}
	return false
}
