package kafka

import (
	"testing"

	"github.com/IBM/sarama"
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
