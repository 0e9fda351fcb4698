package testenv

import (
	"fmt"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/sources"
)

// ProduceOp writes an operation's message as the lab's producers do: key
// the biz id, value {"biz_id","msg_id"}, header msg_id, at ts, to the
// partition murmur2 gives the key among parts. With noise, a record of
// another key goes just before it (a search must tell them apart). It
// returns where the message is.
func (k *Kafka) ProduceOp(t testing.TB, topic, key, msgID string, ts time.Time, parts int32, noise bool) (int32, int64) {
	t.Helper()
	p, err := sources.PartitionFor("murmur2", []byte(key), parts)
	if err != nil {
		t.Fatal(err)
	}
	if noise {
		k.Produce(t, topic, p, "noise-"+key, "{}", nil, ts.Add(-time.Second))
	}
	off := k.Produce(t, topic, p, key, fmt.Sprintf(`{"biz_id":%q,"msg_id":%q}`, key, msgID), map[string]string{"msg_id": msgID}, ts)
	return p, off
}

// AnchorSettlement produces a settlement operation's message (the
// testdata settlement schema: biz_operation, topic settlement-event) at
// its created_at, stores its position in the state row, and commits the
// group settlement-consumer past it when committed.
func AnchorSettlement(t testing.TB, db *DB, k *Kafka, parts int32, biz string, committed, noise bool) (int32, int64) {
	t.Helper()
	var ts time.Time
	var msgID string
	if err := db.SQL.QueryRow("SELECT created_at, msg_id FROM biz_operation WHERE biz_id = ?", biz).Scan(&ts, &msgID); err != nil {
		t.Fatal(err)
	}
	p, off := k.ProduceOp(t, "settlement-event", biz, msgID, ts, parts, noise)
	db.Exec(t, "UPDATE biz_operation SET src_partition = ?, src_offset = ? WHERE biz_id = ?", p, off, biz)
	if committed {
		k.Commit(t, "settlement-consumer", "settlement-event", p, off+1)
	}
	return p, off
}
