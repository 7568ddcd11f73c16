package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCrossClientCommit checks the protocol the exactly-once sink relies
// on: a transaction prepared by one client is committed by another with a
// raw EndTxn; committing it again is reported as "gone" or success; the
// preparing producer is reusable after it ends the transaction with a
// commit retry; fencing the id aborts an open transaction.
func TestCrossClientCommit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		topic := createTopic(t, b.brokers, 1)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		id := uniqueName("txn")
		prod := newClient(t, b.brokers, kgo.TransactionalID(id), kgo.TransactionTimeout(30*time.Second), kgo.DefaultProduceTopic(topic))
		other := newClient(t, b.brokers)

		produce := func(vals ...string) committable {
			t.Helper()
			if err := prod.BeginTransaction(); err != nil {
				t.Fatalf("begin: %v", err)
			}
			for _, v := range vals {
				if err := prod.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
					t.Fatalf("produce: %v", err)
				}
			}
			pid, epoch, err := prod.ProducerID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return committable{TransactionalID: id, ProducerID: pid, Epoch: epoch}
		}

		c1 := produce("a", "b")
		if err := endTxn(ctx, other, c1, true); err != nil {
			t.Fatalf("commit from another client: %v", err)
		}
		err := endTxn(ctx, other, c1, true)
		t.Logf("%s: second commit of the same transaction: %v (gone=%v)", b.name, err, isTxnGone(err))
		if err != nil && !isTxnGone(err) {
			t.Fatalf("second commit: %v, want nil or a 'gone' error", err)
		}
		if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("producer's own commit retry after the external commit: %v", err)
		}
		c2 := produce("c")
		t.Logf("%s: epochs: first %d, second %d", b.name, c1.Epoch, c2.Epoch)
		if err := fenceTxnID(ctx, other, id, 30*time.Second); err != nil {
			t.Fatalf("fence: %v", err)
		}
		err = endTxn(ctx, other, c2, true)
		if !isTxnGone(err) {
			t.Fatalf("commit after fence: %v, want a 'gone' error", err)
		}
		got := readCommitted(t, b.brokers, topic, 2, 2*time.Second)
		var vals []string
		for _, r := range got {
			vals = append(vals, string(r.Value))
		}
		if len(vals) != 2 || vals[0] != "a" || vals[1] != "b" {
			t.Fatalf("read_committed got %v, want [a b]", vals)
		}
		_ = context.Background
	})
}
