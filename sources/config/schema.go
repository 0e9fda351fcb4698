package config

import (
	"strings"

	"github.com/opctl-dev/opctl/sources/config/yamlfile"
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
func joinPath(path, key string) string { return yamlfile.JoinPath(path, key) }

// indexPath appends a list index to a value path.
func indexPath(path string, i int) string { return yamlfile.IndexPath(path, i) }
