package kafka

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/source/ratelimit"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// TestCrashBetweenPrepareAndCommit fails the job between prepare and
// commit with no restarts, checks that the prepared records are not
// visible, then restores the last completed checkpoint with a new sink
// value (as a new process would) and checks that the prepared transaction
// was committed exactly once.
func TestCrashBetweenPrepareAndCommit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		crashAndRestore(t, b, 2, 2)
	})
}

// TestRescaleRestore crashes between prepare and commit at parallelism 3
// and restores at parallelism 2 and, separately, 4: each old writer's
// prepared transactions are committed once by the new writer that gets
// its state, and no id of the old parallelism stays open.
func TestRescaleRestore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		t.Run("3to2", func(t *testing.T) { crashAndRestore(t, b, 3, 2) })
		t.Run("3to4", func(t *testing.T) { crashAndRestore(t, b, 3, 4) })
	})
}

func crashAndRestore(t *testing.T, b backend, before, after int) {
	const count = 6000
	topic := createTopic(t, b.brokers, 2)
	prefix := uniqueName("crash")
	store := checkpoint.NewMemory()
	run := func(par int, plan *faultinject.Plan, restore *checkpoint.Snapshot) error {
		gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(count), datagen.Splits(6), datagen.RatePerSecond(count))
		sk, err := NewSink(b.brokers, indexSerializer(gen), DefaultTopic(topic), DeliveryGuarantee(ExactlyOnce),
			TransactionalIDPrefix(prefix), TransactionTimeout(time.Minute), SinkLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		opts := []stream.Option{stream.Parallelism(par), stream.CheckpointEvery(50 * time.Millisecond),
			stream.CheckpointStorage(store), stream.Restart(restart.None()), stream.Logger(stream.DiscardLogger())}
		if restore != nil {
			opts = append(opts, stream.RestoreFrom(restore))
		}
		env := stream.New(opts...)
		// At most 150 records per reader between completed checkpoints: the
		// data spans many checkpoints however slow they are (a sink can
		// stall ~5 s on the metadata of a topic created moments earlier,
		// and a loaded machine slows every checkpoint).
		paced := ratelimit.Wrap(gen, ratelimit.PerCompletedCheckpoint(150))
		s := stream.FromSource(env, paced, watermark.None[int64](), "gen")
		stream.SinkTo(s, faultinject.WrapSink(sk, plan), "kafka")
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		_, err = env.Execute(ctx, "crash")
		return err
	}
	// About a second of data, so that checkpoint 3 comes well before the
	// end even when checkpoints are slow (the fault fires at the first
	// commit at or after it, the final checkpoint's included).
	plan := faultinject.NewPlan(faultinject.Fault{Kind: faultinject.BeforeCommit, Subtask: 0, Checkpoint: 3})
	if err := run(before, plan, nil); err == nil || len(plan.Fired()) != 1 {
		t.Fatalf("first run: err %v, fired %v; want the injected failure", err, plan.Fired())
	}
	snap, info, err := store.Latest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	visible := readCommitted(t, b.brokers, topic, -1, 2*time.Second)
	t.Logf("after the crash: last checkpoint %d, %d of %d records visible", info.ID, len(visible), count)
	if len(visible) >= count {
		t.Fatalf("%d records visible after a crash before the final commit; want fewer than %d", len(visible), count)
	}
	if err := run(after, faultinject.NewPlan(), snap); err != nil {
		t.Fatalf("restored run: %v", err)
	}
	checkIndexes(t, readCommitted(t, b.brokers, topic, count, 3*time.Second), count)
	checkNoOpenTransactions(t, b.brokers, prefix)
}

// TestLingeringTransactionsAborted leaves open transactions under the
// sink's prefix — for an own slot, for a subtask of a higher earlier
// parallelism and for a slot beyond the pool — and checks that a fresh
// start aborts them all, so read_committed readers do not stall.
func TestLingeringTransactionsAborted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		topic := createTopic(t, b.brokers, 1)
		prefix := uniqueName("linger")
		ids := []string{txnID(prefix, 0, 0), txnID(prefix, 3, 1), txnID(prefix, 4, 9)}
		for _, id := range ids {
			cl := newClient(t, b.brokers, kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(5*time.Minute))
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(t.Context(), kgo.StringRecord("junk "+id)).FirstErr(); err != nil {
				t.Fatal(err)
			}
			cl.Close() // leaves the transaction open
		}
		gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(100), datagen.Splits(2))
		sk, err := NewSink(b.brokers, indexSerializer(gen), DefaultTopic(topic), DeliveryGuarantee(ExactlyOnce),
			TransactionalIDPrefix(prefix), TransactionTimeout(time.Minute), SinkLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(50*time.Millisecond), stream.Logger(stream.DiscardLogger()))
		stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "gen"), sk, "kafka")
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if _, err := env.Execute(ctx, "linger"); err != nil {
			t.Fatal(err)
		}
		if b.name == "kfake" {
			// kfake may not list transactions: check what the pool covers.
			t.Log("kfake: checking the read_committed output only")
		}
		recs := readCommitted(t, b.brokers, topic, 100, 3*time.Second)
		for _, r := range recs {
			if strings.HasPrefix(string(r.Value), "junk") {
				t.Fatalf("aborted record %q visible", r.Value)
			}
		}
		checkIndexes(t, recs, 100)
		checkNoOpenTransactions(t, b.brokers, prefix)
	})
}

// TestUnreachableBroker checks that an exactly-once sink that cannot reach
// its brokers fails its start with an error naming them.
func TestUnreachableBroker(t *testing.T) {
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(10))
	sk, err := NewSink([]string{"127.0.0.1:1"}, indexSerializer(gen), DefaultTopic("x"), DeliveryGuarantee(ExactlyOnce),
		TransactionalIDPrefix("p"), SetupTimeout(2*time.Second), SinkLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(stream.Parallelism(1), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "gen"), sk, "kafka")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err = env.Execute(ctx, "unreachable")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("got %v, want an error naming the broker 127.0.0.1:1", err)
	}
	t.Log(err)
}
