package inspect

import "strings"

// The NEXT of a report is the planner's (repair/plans.Next, structured
// steps), which each front end says its own way (cmd as shell lines); here
// are the pieces of a shell line that any opctl output quotes with.

// IDArg is an id as the last argument of a printed command: " -- " and the
// id shell-quoted. After "--" the command takes it as an argument whatever
// it starts with ("-o", "--from-file=F").
func IDArg(id string) string { return " -- " + ShellQuote(id) }

// WithFlags returns the command line with flags (" --config c.yaml ...")
// after its leading "opctl"; a line that is not an opctl command is
// returned as it is.
func WithFlags(line, flags string) string {
	if flags == "" || !strings.HasPrefix(line, "opctl ") {
		return line
	}
	return "opctl" + flags + line[len("opctl"):]
}

// ShellQuote quotes s for a POSIX shell when it holds anything but safe
// characters, in single quotes (a ' as '\”), which keep everything else
// as written: spaces, $(...), backquotes, a newline. A value that starts
// with "-" is quoted too; only "--" before it keeps a command from taking
// it for a flag (IDArg).
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := s[0] != '-'
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:/@%+=,", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
