package consumer

import (
	"errors"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

func TestEncodeDecode(t *testing.T) {
	for _, m := range []Message{
		{BizID: "PAY-1", MsgID: "m-1", AccountID: 7, Amount: "30.5"},
		{BizID: "F-1", MsgID: "m-2", SKU: "SKU-42", Qty: 3},
		{BizID: "8821", MsgID: "msg-7391", Event: EventPaid, Points: 120},
	} {
		b, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(%s): %v", b, err)
		}
		if got != m {
			t.Errorf("round trip of %s: %+v, want %+v", b, got, m)
		}
	}
	if b, _ := Encode(Message{BizID: "F-1", MsgID: "m"}); strings.Contains(string(b), "amount") {
		t.Errorf("empty settlement fields encoded: %s", b)
	}
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		in, amount, err string
	}{
		{in: `{"biz_id":"P","msg_id":"m","account_id":1,"amount":25}`, amount: "25"},
		{in: `{"biz_id":"P","msg_id":"m","account_id":1,"amount":"25.00"}`, amount: "25.00"},
		{in: `{"biz_id":"P","msg_id":"m","replay":true}`},
		{in: `{"biz_id":"P","amount":-3}`, err: "not a positive decimal"},
		{in: `{"biz_id":"P","amount":"0.00"}`, err: "not a positive decimal"},
		{in: `{"biz_id":"P","amount":1e3}`, err: "not a positive decimal"},
		{in: `{"biz_id":"P","amount":"1.234"}`, err: "not a positive decimal"},
		{in: `{"msg_id":"m"}`, err: "empty biz_id"},
		{in: `not json`, err: "decode message"},
	} {
		m, err := Decode([]byte(tc.in))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Decode(%s) error %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("Decode(%s): %v", tc.in, err)
		case tc.err == "" && m.Amount != tc.amount:
			t.Errorf("Decode(%s) amount %q, want %q", tc.in, m.Amount, tc.amount)
		}
	}
}

// TestProduceMessage: records land where opctl's murmur2 partitioner says,
// with the key, the msg_id header and a timestamp; a producer with a manual
// partitioner is refused with a hint instead of writing to partition 0.
func TestProduceMessage(t *testing.T) {
	const topic, n = "produce-topic", 7
	k := testenv.NewKafka(t, map[string]int32{topic: n})
	p, err := sarama.NewSyncProducer(k.Brokers, ProducerConfig("test"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	seen := map[int32]bool{}
	for _, id := range []string{"PAY-1", "PAY-2", "F-1", "8821", "O-S-1", "x"} {
		part, _, err := ProduceMessage(p, topic, Message{BizID: id, MsgID: "m-" + id})
		if err != nil {
			t.Fatalf("produce %s: %v", id, err)
		}
		want, _ := sources.PartitionFor(config.PartitionerMurmur2, []byte(id), n)
		if part != want {
			t.Errorf("%s went to partition %d, murmur2 says %d", id, part, want)
		}
		seen[part] = true
	}
	if len(seen) < 2 {
		t.Errorf("every record on one partition: %v", seen)
	}

	cons, err := sarama.NewConsumer(k.Brokers, k.Config("test-reader"))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	want, _ := sources.PartitionFor(config.PartitionerMurmur2, []byte("PAY-1"), n)
	pc, err := cons.ConsumePartition(topic, want, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	msg := <-pc.Messages()
	if string(msg.Key) != "PAY-1" || len(msg.Headers) != 1 || string(msg.Headers[0].Key) != HeaderMsgID || string(msg.Headers[0].Value) != "m-PAY-1" || msg.Timestamp.IsZero() {
		t.Errorf("record: key %q headers %v timestamp %v", msg.Key, msg.Headers, msg.Timestamp)
	}

	mc := k.Config("manual")
	mc.Producer.Partitioner = sarama.NewManualPartitioner
	mp, err := sarama.NewSyncProducer(k.Brokers, mc)
	if err != nil {
		t.Fatal(err)
	}
	defer mp.Close()
	_, _, err = ProduceMessage(mp, topic, Message{BizID: "PAY-1", MsgID: "m"})
	if !errors.Is(err, sarama.ErrInvalidPartition) || !strings.Contains(err.Error(), "Murmur2Partitioner") {
		t.Errorf("manual partitioner: %v", err)
	}
}
