package sources

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxBizID is the longest operation id opctl accepts, in bytes.
const MaxBizID = 512

// BadIDError is an id that cannot be an operation key (exit 2).
type BadIDError struct{ Msg string }

// Error says what is wrong with the id.
func (e *BadIDError) Error() string { return e.Msg }

// ExitCode is exit 2: a usage error.
func (e *BadIDError) ExitCode() int { return ExitUsage }

// ValidateBizID rejects ids that cannot be an operation key: empty, over
// MaxBizID bytes, invalid UTF-8 or with control characters. Everything
// else, quotes and SQL included, is an opaque string that is only ever
// bound as a parameter (docs/where.md).
func ValidateBizID(id string) error {
	switch {
	case id == "":
		return &BadIDError{"biz_id is empty"}
	case len(id) > MaxBizID:
		return &BadIDError{fmt.Sprintf("biz_id is %d bytes; at most %d", len(id), MaxBizID)}
	case !utf8.ValidString(id):
		return &BadIDError{"biz_id is not valid UTF-8"}
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return &BadIDError{fmt.Sprintf("biz_id contains a control character (%U)", r)}
		}
	}
	return nil
}
