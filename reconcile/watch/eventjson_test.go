package watch

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// The event lines read back (UnmarshalJSON) and written again are the
// same bytes: what /targets serves is what `opctl tui --watch` reads.
func TestEventRoundTrip(t *testing.T) {
	b, err := os.ReadFile("testdata/events.golden")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var e Event
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		again, err := json.Marshal(e)
		if err != nil || !bytes.Equal(again, line) {
			t.Fatalf("read back and written again:\n%s\nwant\n%s (%v)", again, line, err)
		}
	}
	var e Event
	if err := json.Unmarshal([]byte(`{"event":"flagged","at":"yesterday","biz_id":"b1"}`), &e); err == nil {
		t.Fatal("an at that is not RFC 3339 was read")
	}
}
