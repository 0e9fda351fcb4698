package consumer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Record headers the consumers read. HeaderMsgID is set by ProduceMessage;
// the opctl-* headers are added by `opctl repair apply` to the records it
// republishes (docs/repair.md).
const (
	HeaderMsgID       = "msg_id"
	HeaderPlan        = "opctl-plan"
	HeaderFromStep    = "opctl-from-step"
	HeaderForceEffect = "opctl-force-effect"
)

// Order events carried by the orders pipelines.
const (
	EventPaid    = "PAID"
	EventShipped = "SHIPPED"
)

// Message is the value of every lab record, JSON-encoded. Which fields are
// set depends on the pipeline:
//
//	settlement: biz_id, msg_id, account_id, amount (positive; the debit's delta is -amount)
//	fulfilment: biz_id, msg_id, sku, qty
//	orders:     biz_id (the order id), msg_id, event (PAID | SHIPPED), points
//
// The record key is the biz id. opctl's replay record, published when the
// original record can no longer be read, is {"biz_id","msg_id","replay":true}.
type Message struct {
	BizID string `json:"biz_id"`
	MsgID string `json:"msg_id"`

	// AccountID and Amount are settlement's. Amount is a decimal with at
	// most two fractional digits; it is encoded as a JSON string (money
	// never goes through a float) and decoded from a string or a number.
	AccountID int64  `json:"account_id,omitempty"`
	Amount    string `json:"amount,omitempty"`

	// SKU and Qty are fulfilment's.
	SKU string `json:"sku,omitempty"`
	Qty int    `json:"qty,omitempty"`

	// Event and Points are the orders pipelines'.
	Event  string `json:"event,omitempty"`
	Points int64  `json:"points,omitempty"`

	// Replay marks opctl's replay record (it carries only biz_id and msg_id).
	Replay bool `json:"replay,omitempty"`

	// ExpectedStatus is seed 003's expectedStatus (OrderEvent): the order
	// status its consumer requires to run the event's side effect. It is
	// not part of the lab's own JSON.
	ExpectedStatus string `json:"-"`
}

// validAmount reports whether s is a positive DECIMAL(18,2) literal: 1 to 16
// integer digits, optionally a point and 1 or 2 fractional digits.
func validAmount(s string) bool {
	whole, frac, hasPoint := strings.Cut(s, ".")
	if len(whole) < 1 || len(whole) > 16 || (hasPoint && (len(frac) < 1 || len(frac) > 2)) {
		return false
	}
	for _, r := range whole + frac {
		if r < '0' || r > '9' {
			return false
		}
	}
	return strings.Trim(whole+frac, "0") != ""
}

// Encode returns the record value of m.
func Encode(m Message) ([]byte, error) {
	if m.BizID == "" {
		return nil, errors.New("consumer: encode: empty biz_id")
	}
	return json.Marshal(m)
}

// Decode parses a record value. It checks only what every pipeline needs (a
// biz_id, a well-formed amount when there is one); a pipeline checks its own
// fields when it needs them, so that a replay record decodes.
func Decode(value []byte) (Message, error) {
	var aux struct {
		Message
		Amount json.RawMessage `json:"amount,omitempty"`
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	if err := dec.Decode(&aux); err != nil {
		return Message{}, fmt.Errorf("consumer: decode message: %w", err)
	}
	m := aux.Message
	if len(aux.Amount) > 0 && string(aux.Amount) != "null" {
		var s string
		if aux.Amount[0] == '"' {
			if err := json.Unmarshal(aux.Amount, &s); err != nil {
				return Message{}, fmt.Errorf("consumer: decode message: amount: %w", err)
			}
		} else {
			s = string(aux.Amount)
		}
		if !validAmount(s) {
			return Message{}, fmt.Errorf("consumer: decode message: amount %q is not a positive decimal with at most 2 fractional digits", s)
		}
		m.Amount = s
	}
	if m.BizID == "" {
		return Message{}, errors.New("consumer: decode message: empty biz_id")
	}
	return m, nil
}

// Murmur2Partitioner is a sarama.PartitionerConstructor that places a keyed
// record exactly where the Java client's default partitioner (and opctl's
// `partitioner: murmur2`) does: it calls sources.PartitionFor("murmur2",
// key, n) with the topic's real partition count at send time. A record
// without a key is refused.
func Murmur2Partitioner(topic string) sarama.Partitioner { return murmur2Partitioner{} }

type murmur2Partitioner struct{}

func (murmur2Partitioner) Partition(msg *sarama.ProducerMessage, n int32) (int32, error) {
	if msg.Key == nil {
		return -1, errors.New("consumer: murmur2 partitioner: record has no key")
	}
	key, err := msg.Key.Encode()
	if err != nil {
		return -1, err
	}
	return sources.PartitionFor(config.PartitionerMurmur2, key, n)
}

// RequiresConsistency is true: a key always maps to the same partition, even
// while that partition is unavailable.
func (murmur2Partitioner) RequiresConsistency() bool { return true }

// ProducerConfig is a sarama configuration for the lab's producers: protocol
// 3.5, acks=all, successes returned (a SyncProducer needs them) and
// Murmur2Partitioner.
func ProducerConfig(clientID string) *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V3_5_0_0
	c.ClientID = clientID
	c.Metadata.AllowAutoTopicCreation = false
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Successes = true
	c.Producer.Retry.Backoff = 50 * time.Millisecond
	c.Producer.Partitioner = Murmur2Partitioner
	return c
}

// ProduceMessage publishes m to topic: key = biz id, header msg_id, record
// timestamp now, value Encode(m). p must have been built with
// Murmur2Partitioner as its partitioner (ProducerConfig does that), which
// puts the record on the partition sources.PartitionFor("murmur2", key, n)
// names. A SyncProducer does not reveal the topic's partition count, so a
// manual partitioner cannot be served: the record is sent with partition -1,
// which a manual partitioner refuses (ErrInvalidPartition, reported with a
// hint) instead of silently writing everything to partition 0.
func ProduceMessage(p sarama.SyncProducer, topic string, m Message) (partition int32, offset int64, err error) {
	value, err := Encode(m)
	if err != nil {
		return -1, -1, err
	}
	msg := &sarama.ProducerMessage{
		Topic:     topic,
		Key:       sarama.StringEncoder(m.BizID),
		Value:     sarama.ByteEncoder(value),
		Headers:   []sarama.RecordHeader{{Key: []byte(HeaderMsgID), Value: []byte(m.MsgID)}},
		Timestamp: time.Now(),
		Partition: -1,
	}
	partition, offset, err = p.SendMessage(msg)
	if errors.Is(err, sarama.ErrInvalidPartition) {
		return -1, -1, fmt.Errorf("consumer: produce %s to %s: %w (the producer must use consumer.Murmur2Partitioner, see consumer.ProducerConfig)", m.BizID, topic, err)
	}
	if err != nil {
		return -1, -1, fmt.Errorf("consumer: produce %s to %s: %w", m.BizID, topic, err)
	}
	return partition, offset, nil
}

// OrderEvent is the value of seed 003's order events, as its author
// describes them: {"msgId", "orderId", "expectedStatus"}, with the event's
// type beside them (the consumer's doSideEffect depends on it). The record
// key is the order id in decimal; the msg id is in the value only (no
// msg_id header: opctl reads it through idempotency.msg_id_path).
type OrderEvent struct {
	MsgID          string `json:"msgId"`
	OrderID        int64  `json:"orderId"`
	ExpectedStatus string `json:"expectedStatus"`
	EventType      string `json:"eventType"`
}

// Key is the event's record key: the order id in decimal.
func (e OrderEvent) Key() string { return strconv.FormatInt(e.OrderID, 10) }

// DecodeOrderEvent parses a seed 003 record value into a Message: BizID is
// the order id, MsgID the msgId, Event the eventType, ExpectedStatus the
// expectedStatus. Every field is required.
func DecodeOrderEvent(value []byte) (Message, error) {
	var e OrderEvent
	if err := json.Unmarshal(value, &e); err != nil {
		return Message{}, fmt.Errorf("consumer: decode order event: %w", err)
	}
	if e.MsgID == "" || e.OrderID <= 0 || e.ExpectedStatus == "" || e.EventType == "" {
		return Message{}, fmt.Errorf("consumer: decode order event: msgId, orderId (> 0), expectedStatus and eventType are required: %s", bytes.TrimSpace(value))
	}
	return Message{BizID: e.Key(), MsgID: e.MsgID, Event: e.EventType, ExpectedStatus: e.ExpectedStatus}, nil
}

// ProduceOrderEvent publishes a seed 003 order event to topic: key = the
// order id, value = its JSON, no headers (the seed's producer sets none),
// placed by p's partitioner (ProducerConfig's murmur2).
func ProduceOrderEvent(p sarama.SyncProducer, topic string, e OrderEvent) (partition int32, offset int64, err error) {
	value, err := json.Marshal(e)
	if err != nil {
		return -1, -1, err
	}
	partition, offset, err = p.SendMessage(&sarama.ProducerMessage{
		Topic: topic, Key: sarama.StringEncoder(e.Key()), Value: sarama.ByteEncoder(value),
		Timestamp: time.Now(), Partition: -1,
	})
	if err != nil {
		return -1, -1, fmt.Errorf("consumer: produce order event %s of %d to %s: %w", e.MsgID, e.OrderID, topic, err)
	}
	return partition, offset, nil
}
