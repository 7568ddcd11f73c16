package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// indexSerializer keys each index by its datagen split, so that one split
// lands in one partition and its order can be checked there.
func indexSerializer(gen *datagen.Source[int64]) Serializer[int64] {
	return KeyValueSerializer(
		func(v int64) ([]byte, error) { return []byte("split-" + strconv.Itoa(gen.SplitOf(v))), nil },
		func(v int64) ([]byte, error) { return strconv.AppendInt(nil, v, 10), nil })
}

// checkIndexes asserts that recs hold 0..count-1 once each and, within each
// key (split), in increasing order.
func checkIndexes(t *testing.T, recs []*kgo.Record, count int64) {
	t.Helper()
	seen := make([]int, count)
	last := map[string]int64{}
	var dups, disorder int
	for _, r := range recs {
		v, err := strconv.ParseInt(string(r.Value), 10, 64)
		if err != nil || v < 0 || v >= count {
			t.Fatalf("bad record value %q at %s[%d]@%d", r.Value, r.Topic, r.Partition, r.Offset)
		}
		seen[v]++
		if seen[v] > 1 {
			dups++
		}
		k := string(r.Key)
		if p, ok := last[k]; ok && v <= p {
			disorder++
		}
		last[k] = v
	}
	missing := 0
	for _, n := range seen {
		if n == 0 {
			missing++
		}
	}
	if missing > 0 || dups > 0 || disorder > 0 || int64(len(recs)) != count {
		t.Fatalf("got %d records, want %d: %d missing, %d duplicated, %d out of order within a key", len(recs), count, missing, dups, disorder)
	}
}

// TestSinkExactlyOnceUnderFailures runs datagen → map → Kafka sink
// (exactly-once) with injected failures of every kind, then reads the topic
// with a read_committed consumer: every record once, in order per split.
func TestSinkExactlyOnceUnderFailures(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, seed := range []int64{1, 2} {
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				runSinkChaos(t, b, seed)
			})
		}
	})
}

func runSinkChaos(t *testing.T, b backend, seed int64) {
	const parallelism, splits = 3, 6
	count := int64(30_000)
	if testing.Short() {
		count = 10_000
	}
	topic := createTopic(t, b.brokers, 3)
	prefix := uniqueName("eos")
	plan := faultinject.RandomPlan(seed, 5, faultinject.Kinds(), parallelism, count/parallelism/2, 10)
	t.Logf("plan %v", plan)
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(count), datagen.Splits(splits),
		datagen.RatePerSecond(float64(count)))
	sk, err := NewSink(b.brokers, indexSerializer(gen), DefaultTopic(topic), DeliveryGuarantee(ExactlyOnce),
		TransactionalIDPrefix(prefix), TransactionTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(stream.Parallelism(parallelism), stream.CheckpointEvery(100*time.Millisecond),
		stream.Restart(restart.FixedDelay(10, 0)), stream.Logger(stream.DiscardLogger()))
	s := stream.FromSource(env, faultinject.WrapSource(gen, plan), watermark.None[int64](), "gen")
	m := stream.Map(s, func(v int64) int64 { return v }, stream.Name("identity"))
	stream.SinkTo(m, faultinject.WrapSink(sk, plan), "kafka")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	res, err := env.Execute(ctx, "kafka-sink-chaos")
	if err != nil {
		t.Fatalf("job: %v (fired %v)", err, plan.Fired())
	}
	t.Logf("%d faults fired %v, %d restarts, %d checkpoints", len(plan.Fired()), plan.Fired(), res.Restarts, res.Checkpoints.Completed)
	recs := readCommitted(t, b.brokers, topic, int(count), 3*time.Second)
	checkIndexes(t, recs, count)
	checkNoOpenTransactions(t, b.brokers, prefix)
}

// checkNoOpenTransactions asserts that no transaction of the prefix is
// open (where the broker can list transactions). opts are added to the
// admin client's options (TLS, SASL).
func checkNoOpenTransactions(t *testing.T, brokers []string, prefix string, opts ...kgo.Opt) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, brokers, opts...))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	listed, err := adm.ListTransactions(ctx, nil, []string{"Ongoing", "PrepareCommit", "PrepareAbort"})
	if err != nil {
		t.Logf("cannot list transactions (%v); open-transaction check skipped", err)
		return
	}
	for id, tx := range listed {
		if _, _, ok := parseTxnID(prefix, id); ok {
			t.Errorf("transaction %s left open in state %s", id, tx.State)
		}
	}
}

func TestSinkConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		opts []SinkOption
		bk   []string
	}{
		{"no brokers", nil, nil},
		{"one slot", []SinkOption{TransactionSlots(1)}, []string{"127.0.0.1:1"}},
		{"bad timeout", []SinkOption{TransactionTimeout(time.Millisecond)}, []string{"127.0.0.1:1"}},
		{"no buffered records", []SinkOption{MaxBufferedRecords(0)}, []string{"127.0.0.1:1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewSink(c.bk, StringSerializer(), c.opts...)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("got %v, want ErrInvalidConfig", err)
			}
			t.Log(err)
		})
	}
}

// TestSinkMaxBufferedRecords: the producers of a sink buffer franz-go's
// default 10,000 records unless MaxBufferedRecords says otherwise.
func TestSinkMaxBufferedRecords(t *testing.T) {
	for _, tc := range []struct {
		opts []SinkOption
		want int64
	}{
		{nil, DefaultMaxBufferedRecords},
		{[]SinkOption{MaxBufferedRecords(2500)}, 2500},
	} {
		cfg := defaultSinkConfig()
		cfg.brokers = []string{"127.0.0.1:1"}
		for _, o := range tc.opts {
			o.apply(&cfg)
		}
		s := &kafkaSink[string]{cfg: cfg}
		cl, err := kgo.NewClient(s.producerOpts("")...)
		if err != nil {
			t.Fatal(err)
		}
		got := cl.OptValue(kgo.MaxBufferedRecords)
		cl.Close()
		if got != tc.want {
			t.Errorf("MaxBufferedRecords %v: producer buffers %v (%T) records, want %d", tc.opts, got, got, tc.want)
		}
	}
}
