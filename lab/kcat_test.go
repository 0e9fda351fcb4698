package lab_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/lab/cluster"
	"github.com/opctl-dev/opctl/lab/consumer"
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
