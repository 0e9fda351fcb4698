package cmd

import (
	"os"
	"os/user"
	"unicode/utf8"

	"github.com/opctl-dev/opctl/cmd/ui"
)

// checkText refuses (exit 2, before anything runs) a flag value opctl
// records as text — in plans, audit rows and run records — that is not
// valid UTF-8: a plan must carry it exactly, as JSON and as a MySQL
// utf8mb4 column do. pairs are names and values: "--reason", opts.Reason.
func checkText(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if !utf8.ValidString(pairs[i+1]) {
			return usageErrorf("%s %s is not valid UTF-8: opctl records it as text in the plan and the audit; give it in UTF-8", pairs[i], ui.Safe(pairs[i+1]))
		}
	}
	return nil
}

// operatorOr is who acts (recorded in plans and the audit): flag
// (--operator) when given, else $USER, else the OS user name, else
// "unknown"; refused when it is not valid UTF-8 (checkText).
func operatorOr(flag string) (string, error) {
	if flag != "" {
		return flag, checkText("--operator", flag)
	}
	if u := os.Getenv("USER"); u != "" {
		if err := checkText("$USER", u); err != nil {
			return "", usageErrorf("%v, or pass --operator NAME", err)
		}
		return u, nil
	}
	if u, err := user.Current(); err == nil && utf8.ValidString(u.Username) {
		return u.Username, nil
	}
	return "unknown", nil
}
