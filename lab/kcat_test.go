package lab_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/lab/cluster"
	"github.com/opctl-dev/opctl/lab/consumer"
	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/kafka"
)

// TestKcatInterop checks the lab's Kafka-protocol cluster with a client
// nobody here wrote: Debian's kcat (librdkafka) lists the topics and reads
// a lab message with its key and msg_id header. .ci/run installs kcat.
func TestKcatInterop(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("kcat is not installed; .ci/run should have installed it (apt-get install kcat)")
		}
		t.Skip("SKIPPING: kcat is not installed (apt-get install kcat)")
	}
	c, err := cluster.Start(map[string]int32{"settlement-event": 4})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := sarama.NewSyncProducer(c.Brokers, consumer.ProducerConfig("kcat-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m := consumer.Message{BizID: "PAY-K-1", MsgID: "m-PAY-K-1", AccountID: 1, Amount: "3.00"}
	if _, _, err := consumer.ProduceMessage(p, "settlement-event", m); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, kcat, "-b", c.Brokers[0], "-L").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `topic "settlement-event" with 4 partitions`) {
		t.Fatalf("kcat -L: %v\n%s", err, out)
	}
	out, err = exec.CommandContext(ctx, kcat, "-b", c.Brokers[0], "-C", "-t", "settlement-event", "-o", "beginning", "-e", "-q",
		"-f", `%k|%h|%s\n`).CombinedOutput()
	if err != nil {
		t.Fatalf("kcat -C: %v\n%s", err, out)
	}
	got := strings.TrimSpace(string(out))
	if !strings.HasPrefix(got, "PAY-K-1|msg_id=m-PAY-K-1|") || !strings.Contains(got, `"biz_id":"PAY-K-1"`) {
		t.Fatalf("kcat -C read %q", got)
	}
}

// TestMockClusterDegradesPerField: librdkafka's mock cluster (kcat -X
// test.mock.num.brokers=3), written to by franz-go's kgo, answers
// ApiVersions but not DescribeGroups, and its ListOffsets answers from
// version 4 on do not decode. Each request answers its own fields: the
// committed offset, the log bounds and the message position are read; only
// the group's state and members are unknown, and the error says why.
// Before, the one unsupported request discarded the whole view.
func TestMockClusterDegradesPerField(t *testing.T) {
	m := testenv.NewMockCluster(t, 3)
	const topic, group = "settlement-event", "settlement-consumer"
	at := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	for i := range 5 {
		m.Produce(t, topic, 1, fmt.Sprintf("OTHER-%d", i), "{}", nil, at.Add(time.Duration(i)*time.Millisecond))
	}
	off := m.Produce(t, topic, 1, "PAY-M-1", `{"biz_id":"PAY-M-1"}`, map[string]string{"msg_id": "m-PAY-M-1"}, at.Add(10*time.Millisecond))
	m.Produce(t, topic, 1, "OTHER-9", "{}", nil, at.Add(20*time.Millisecond))
	m.Commit(t, group, topic, 1, off)

	r := kafka.New(config.Kafka{Brokers: m.Brokers, Version: "3.5.0"}, 10*time.Second)
	defer r.Close()
	ctx := context.Background()
	g, err := r.Group(ctx, topic, group)
	var pe *sources.PartialKafkaError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "group_state unknown") {
		t.Fatalf("Group: %v, want a partial read naming group_state", err)
	}
	if g.Known(sources.FieldCommitted) != true || !g.Known(sources.FieldLogStart) || !g.Known(sources.FieldLogEnd) || g.Known(sources.FieldGroup) {
		t.Fatalf("unknown fields %+v, want only %s", g.Unknown, sources.FieldGroup)
	}
	pv := g.Partitions[1]
	if pv.Committed != off || pv.LogStart != 0 || pv.LogEnd != off+2 {
		t.Errorf("partition 1: %+v, want committed %d, log 0..%d", pv, off, off+2)
	}

	for _, tc := range []struct {
		name string
		req  sources.LocateRequest
	}{
		{"stored", sources.LocateRequest{Topic: topic, Partition: 1, Offset: off, Key: []byte("PAY-M-1")}},
		{"searched", sources.LocateRequest{Topic: topic, Partition: 1, Offset: -1, Key: []byte("PAY-M-1"), MsgID: "m-PAY-M-1",
			Around: at.Add(10 * time.Millisecond), Window: 5 * time.Minute, Limit: 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loc, err := r.Locate(ctx, tc.req)
			if err != nil || loc.Offset != off || loc.Message == nil || string(loc.Message.Key) != "PAY-M-1" {
				t.Fatalf("Locate: %+v, %v; want offset %d with the message", loc, err, off)
			}
			if tc.name == "searched" && (!strings.Contains(loc.Detail, "timestamp lookup found no offset") ||
				!strings.Contains(loc.Detail, "searched from the log start 0 instead")) {
				t.Errorf("the detail does not say the search fell back to the log start: %s", loc.Detail)
			}
		})
	}
}
