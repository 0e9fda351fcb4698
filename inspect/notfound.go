package inspect

import (
	"fmt"
	"strings"

	"github.com/opctl-dev/opctl/sources"
)

// NotFoundError says the operation is not known (exit 4).
type NotFoundError struct {
	BizID string
	// Pipeline is the pipeline asked for; "" when every one was tried.
	Pipeline string
	// Pipelines are the pipelines tried (named in the message).
	Pipelines []string
}

// Error says which pipelines do not know the id.
func (e *NotFoundError) Error() string {
	switch {
	case e.Pipeline != "":
		return fmt.Sprintf("%s is not known to pipeline %s", e.BizID, e.Pipeline)
	case len(e.Pipelines) > 0:
		return fmt.Sprintf("%s is not known to any pipeline (%s)", e.BizID, strings.Join(e.Pipelines, ", "))
	}
	return fmt.Sprintf("%s is not known to any pipeline", e.BizID)
}

// ExitCode is exit 4: not found.
func (e *NotFoundError) ExitCode() int { return sources.ExitNotFound }
