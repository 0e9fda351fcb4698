package connect_test

import (
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/connect"
)

// TestOpenAssemblesTheCollector: the Collector every triage reads with is
// built here from the clients, once: the reader, the prober, the Kafka
// reader or why there is none, the configured audit table and the timeout.
// Nothing connects (pools open on first use).
func TestOpenAssemblesTheCollector(t *testing.T) {
	for _, tc := range []struct {
		name    string
		brokers []string
		timeout time.Duration
	}{
		{"no brokers", nil, 0},
		{"brokers", []string{"127.0.0.1:1"}, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{MySQL: config.MySQL{DSN: "opctl:pw@tcp(127.0.0.1:1)/opctl"}, Kafka: config.Kafka{Brokers: tc.brokers, Version: "3.5.0"},
				Audit: config.Audit{Table: "ops_audit"}}
			c, err := connect.Open(cfg, connect.Options{Timeout: tc.timeout, SearchWindow: time.Minute, SearchLimit: 7})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := c.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}()
			wantTimeout := tc.timeout
			if wantTimeout == 0 {
				wantTimeout = sources.DefaultTimeout
			}
			col := c.Collector
			if col == nil || col.DB != c.Reader || col.Prober != c.Prober || col.AuditTable != "ops_audit" ||
				col.Timeout != wantTimeout || c.Timeout != wantTimeout || col.SearchWindow != time.Minute || col.SearchLimit != 7 {
				t.Fatalf("collector %+v (clients: timeout %v)", col, c.Timeout)
			}
			if col.KafkaMissing != c.KafkaMissing {
				t.Errorf("collector says Kafka is missing because %q, the clients %q", col.KafkaMissing, c.KafkaMissing)
			}
			if tc.brokers == nil {
				if col.Kafka != nil || c.Kafka != nil || !strings.Contains(col.KafkaMissing, "kafka.brokers is empty") {
					t.Errorf("no brokers: kafka %v, missing %q", col.Kafka, col.KafkaMissing)
				}
				return
			}
			if c.Kafka == nil || col.Kafka != c.Kafka || col.KafkaMissing != "" {
				t.Errorf("brokers: collector kafka %v, clients %v, missing %q", col.Kafka, c.Kafka, col.KafkaMissing)
			}
		})
	}
}

// TestOpenWriterValidates: the write path is opened after the same checks
// as the read path, and on mysql.write_dsn when set.
func TestOpenWriterValidates(t *testing.T) {
	if _, err := connect.OpenWriter(&config.Config{}, 0); err == nil || !strings.Contains(err.Error(), "mysql.dsn is empty") {
		t.Errorf("no DSN: %v", err)
	}
	cfg := &config.Config{MySQL: config.MySQL{DSN: "opctl:pw@tcp(127.0.0.1:1)/opctl", WriteDSN: "w:pw@tcp(127.0.0.2:1)/opctl"}}
	w, err := connect.OpenWriter(cfg, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !strings.Contains(w.Addr(), "127.0.0.2") {
		t.Errorf("writer on %s, want mysql.write_dsn's server", w.Addr())
	}
}
