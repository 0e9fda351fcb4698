package kafka

import (
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/sources/config"
)

func TestKafkaVersion(t *testing.T) {
	cases := []struct {
		in   string
		want sarama.KafkaVersion
	}{
		{"", sarama.V3_5_0_0},
		{"3.5.0", sarama.V3_5_0_0},
		{"2.8.1", sarama.V2_8_1_0},
		{"3.5.9", sarama.V3_5_2_0},    // unknown patch: the closest older release
		{"99.0.0", sarama.MaxVersion}, // newer than sarama: its newest
		{"0.11.0.2", sarama.V0_11_0_2},
		{"latest", sarama.DefaultVersion},
		{"3.5", sarama.DefaultVersion},
	}
	for _, tc := range cases {
		if got := kafkaVersion(tc.in); got != tc.want {
			t.Errorf("kafkaVersion(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestIsolationLevel(t *testing.T) {
	cases := []struct {
		level, version string
		want           sarama.IsolationLevel
		err            string
	}{
		{"", "3.5.0", sarama.ReadUncommitted, ""},
		{"read_uncommitted", "3.5.0", sarama.ReadUncommitted, ""},
		{"read_committed", "3.5.0", sarama.ReadCommitted, ""},
		{"read_committed", "0.11.0.0", sarama.ReadCommitted, ""},
		{"read_committed", "0.10.2.0", 0, "kafka: isolation_level read_committed needs kafka.version 0.11.0 or newer (transactions), not 0.10.2.0: raise kafka.version or set isolation_level: read_uncommitted"},
		{"", "0.10.2.0", sarama.ReadUncommitted, ""},
	}
	for _, tc := range cases {
		c, err := saramaConfig(config.Kafka{Version: tc.version, IsolationLevel: tc.level}, time.Second)
		switch {
		case tc.err != "":
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q on %s: error %v, want %q", tc.level, tc.version, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q on %s: %v", tc.level, tc.version, err)
		case c.Consumer.IsolationLevel != tc.want:
			t.Errorf("%q on %s: isolation %v, want %v", tc.level, tc.version, c.Consumer.IsolationLevel, tc.want)
		}
	}
}
