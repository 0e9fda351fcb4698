package config

import (
	"fmt"
	"sort"
	"strings"

	"github.com/opctl-dev/opctl/sources/config/yamlfile"
)

// Error is one configuration problem, located at a line of the file.
//
// It renders as "config FILE:LINE: message"; without a line as
// "config FILE: message"; without a file (a Config built in code, or a value
// that came from a flag) as "config: message".
type Error struct {
	// File is the configuration file name as given to Load or Parse.
	File string
	// Line is the 1-based line of the offending YAML node, or 0 if unknown.
	Line int
	// Msg is the problem, without the location prefix.
	Msg string
}

// Error implements error.
func (e *Error) Error() string {
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("config %s:%d: %s", e.File, e.Line, e.Msg)
	case e.File != "":
		return fmt.Sprintf("config %s: %s", e.File, e.Msg)
	default:
		return "config: " + e.Msg
	}
}

// ErrorList is every problem found in one configuration, sorted by line. Its
// Error method joins the messages with newlines. Parse, Load, Validate,
// ValidateKafka and ValidateMySQL return a non-empty ErrorList (never a
// nil ErrorList wrapped in a non-nil error).
type ErrorList []*Error

// Error implements error: one "config FILE:LINE: message" per line.
func (l ErrorList) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap exposes the individual errors to errors.Is / errors.As.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// asError sorts the list by line (stably, so problems on one line keep the
// order in which they were found) and returns it as an error, or nil.
func (l ErrorList) asError() error {
	if len(l) == 0 {
		return nil
	}
	sort.SliceStable(l, func(i, j int) bool { return l[i].Line < l[j].Line })
	return l
}

// suggest returns the candidate a user most likely meant by word, or ""
// (yamlfile.Suggest).
func suggest(word string, candidates []string) string { return yamlfile.Suggest(word, candidates) }

// didYouMean formats a suggestion as ` (did you mean "x"?)`, or "".
func didYouMean(word string, candidates []string) string {
	return yamlfile.DidYouMean(word, candidates)
}

// quoteList renders values as `"a", "b"` for messages.
func quoteList(vals []string) string {
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

// DidYouMean is ` (did you mean "x"?)` for the candidate closest to word
// (a case-insensitive match, else one within edit distance 2), or "":
// the suggestion of every opctl file error (config and runbooks).
func DidYouMean(word string, candidates []string) string { return didYouMean(word, candidates) }
