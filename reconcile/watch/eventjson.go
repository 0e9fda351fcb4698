package watch

import (
	"encoding/json"
	"fmt"
	"time"
)

// UnmarshalJSON reads an event line (or an element of /targets) as
// MarshalJSON writes it: what `opctl tui --watch` and scripts read back.
func (e *Event) UnmarshalJSON(b []byte) error {
	var v struct {
		Event    string `json:"event"`
		At       string `json:"at"`
		Pipeline string `json:"pipeline"`
		BizID    string `json:"biz_id"`
		Verdict  string `json:"verdict"`
		Severity string `json:"severity"`
		Summary  string `json:"summary"`
		Cause    struct {
			Source      string     `json:"source"`
			Table       *string    `json:"table"`
			Position    *string    `json:"position"`
			CommittedAt *time.Time `json:"committed_at"`
		} `json:"cause"`
		LatencyMS *int64 `json:"latency_ms"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	at, err := time.Parse(time.RFC3339Nano, v.At)
	if err != nil {
		return fmt.Errorf("event of %q: at %q is not RFC 3339: %w", v.BizID, v.At, err)
	}
	*e = Event{Event: v.Event, At: at, Pipeline: v.Pipeline, BizID: v.BizID, Verdict: v.Verdict, Severity: v.Severity,
		Summary: v.Summary, Cause: Cause{Source: v.Cause.Source, Table: v.Cause.Table, Position: v.Cause.Position, CommittedAt: v.Cause.CommittedAt},
		LatencyMS: v.LatencyMS}
	return nil
}
