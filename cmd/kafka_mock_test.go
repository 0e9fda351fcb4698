package cmd

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
)

// TestWhereAgainstMockCluster: `where` against librdkafka's mock cluster
// (a broker that is not ours, written to by franz-go's kgo), which does
// not support DescribeGroups: the committed offset, the log bounds, the
// message read at its stored position and the redelivery decision are all
// there; only the group's state and owner are unknown, named with why in
// kafka.unknown and sources.kafka. Before, the report lost the whole Kafka
// view.
func TestWhereAgainstMockCluster(t *testing.T) {
	t.Parallel()
	m := testenv.NewMockCluster(t, 3)
	f := newFixture(t, "settlement", "settlement-event")
	at := time.Now().Add(-10 * time.Minute).Truncate(time.Millisecond)
	p, err := sources.PartitionFor("murmur2", []byte("PAY-9"), 4) // the mock creates 4 partitions
	if err != nil {
		t.Fatal(err)
	}
	m.Produce(t, "settlement-event", p, "noise", "{}", nil, at.Add(-time.Second))
	off := m.Produce(t, "settlement-event", p, "PAY-9", `{"biz_id":"PAY-9"}`, map[string]string{"msg_id": "m-9"}, at)
	m.Produce(t, "settlement-event", p, "noise", "{}", nil, at.Add(time.Second))
	m.Commit(t, "settlement-consumer", "settlement-event", p, off)
	f.db.Exec(t, "INSERT INTO biz_operation (biz_id, status, version, msg_id, src_partition, src_offset, created_at, updated_at) VALUES ('PAY-9', 'INIT', 1, 'm-9', ?, ?, NOW(3) - INTERVAL 10 MINUTE, NOW(3))", p, off)

	code, out, errOut := runCLI(context.Background(), false, "--config", f.cfg, "--mysql-dsn", f.db.DSN,
		"--brokers", strings.Join(m.Brokers, ","), "--timeout", "10s", "where", "PAY-9", "-o", "json")
	var r struct {
		Kafka struct {
			Partition  *int32            `json:"partition"`
			Offset     *int64            `json:"offset"`
			Committed  *int64            `json:"committed"`
			LogStart   *int64            `json:"log_start"`
			LogEnd     *int64            `json:"log_end"`
			Redelivery string            `json:"redelivery"`
			Located    string            `json:"located"`
			Unknown    map[string]string `json:"unknown"`
		} `json:"kafka"`
		Sources map[string]string `json:"sources"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, out, errOut)
	}
	k := r.Kafka
	if k.Offset == nil || *k.Offset != off || k.Located != "stored" || k.Committed == nil || *k.Committed != off ||
		k.LogStart == nil || *k.LogStart != 0 || k.LogEnd == nil || *k.LogEnd != off+2 || k.Redelivery != "yes" {
		t.Errorf("kafka view lost fields the broker serves:\n%s", out)
	}
	if len(k.Unknown) != 2 || !strings.Contains(k.Unknown["group_state"], "describe group") || k.Unknown["partition_owner"] == "" {
		t.Errorf("kafka.unknown %v, want group_state and partition_owner with why", k.Unknown)
	}
	if code != ExitPartial || !strings.Contains(r.Sources["kafka"], "partial read: group_state unknown") {
		t.Errorf("exit %d, sources.kafka %q; want 6 naming the unknown field", code, r.Sources["kafka"])
	}
	_, human, _ := runCLI(context.Background(), false, "--config", f.cfg, "--mysql-dsn", f.db.DSN,
		"--brokers", strings.Join(m.Brokers, ","), "--timeout", "10s", "where", "PAY-9")
	if !strings.Contains(human, "unknown: group_state, partition_owner (describe group:") || !strings.Contains(human, "redelivery: yes") {
		t.Errorf("the human view does not name the unknown fields:\n%s", human)
	}
}
