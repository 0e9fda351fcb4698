package mysql

import (
	"encoding/json"
	"errors"

	gomysql "github.com/go-sql-driver/mysql"
)

// attestedOf reads the "attested" object of an audit after_image: keys are
// request ids, evidence identities or "*", values applied | absent |
// compensated | reversed. Anything else (absent, not an object, non-string
// values) yields nil: an attestation is never guessed.
func attestedOf(img []byte) map[string]string {
	var aux struct {
		Attested map[string]json.RawMessage `json:"attested"`
	}
	if json.Unmarshal(img, &aux) != nil || len(aux.Attested) == 0 {
		return nil
	}
	out := make(map[string]string, len(aux.Attested))
	for k, raw := range aux.Attested {
		var v string
		if json.Unmarshal(raw, &v) != nil {
			continue
		}
		switch v {
		case "applied", "absent", "compensated", "reversed":
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Server error numbers the repair engine reacts to.
const (
	errDupEntry        = 1062
	errLockWaitTimeout = 1205
	errDeadlock        = 1213
)

func serverErr(err error) (uint16, bool) {
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		return me.Number, true
	}
	return 0, false
}

// isRetryable reports whether err is a deadlock or a lock wait timeout: the
// server rolled the statement's transaction back (or the statement alone)
// and running the whole transaction again is safe.
func isRetryable(err error) bool {
	n, ok := serverErr(err)
	return ok && (n == errDeadlock || n == errLockWaitTimeout)
}

// isDuplicateKey reports whether err is a duplicate-key error (1062).
func isDuplicateKey(err error) bool {
	n, ok := serverErr(err)
	return ok && n == errDupEntry
}

// serverErrorNumber returns the MySQL error number of err, 0 when err is not
// a server error.
func serverErrorNumber(err error) int {
	n, _ := serverErr(err)
	return int(n)
}
