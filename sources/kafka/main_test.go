package kafka_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/opctl-dev/opctl/lab/testenv"
)

// childKafkaEnv, set to "topic:partitions", makes the test binary a kfake
// broker instead (childKafka): it prints its address and serves until its
// standard input closes.
const childKafkaEnv = "OPCTL_TEST_KFAKE_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childKafkaEnv); spec != "" {
		os.Exit(serveKafka(spec))
	}
	os.Exit(m.Run())
}

func serveKafka(spec string) int {
	name, n, _ := strings.Cut(spec, ":")
	parts, err := strconv.Atoi(n)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad", childKafkaEnv, spec)
		return 2
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0), kfake.SeedTopics(int32(parts), name))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	fmt.Println(c.ListenAddrs()[0])
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// childKafka starts a kfake broker in a process of its own, with one topic
// of parts partitions: a benchmark's allocations are then the client's
// alone, not the broker's too. It stops when the benchmark ends.
func childKafka(tb testing.TB, topic string, parts int32) *testenv.Kafka {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:%d", childKafkaEnv, topic, parts))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("kfake child: %v", err)
	}
	return &testenv.Kafka{Brokers: []string{strings.TrimSpace(addr)}}
}
