package kafka

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// passRecords is the source's deserializer and the sink's serializer of
// a job that passes fetched records through: the sink produces each
// fetched *kgo.Record itself (RecordSerializer), retargeted to the
// output topic. It counts which path the sink took.
type passRecords struct {
	owned, fresh atomic.Int64
}

func (p *passRecords) Deserialize(r *kgo.Record) (*kgo.Record, error) { return r, nil }

func (p *passRecords) SerializeRecord(r *kgo.Record) (*kgo.Record, error) {
	p.owned.Add(1)
	r.Topic = "" // the sink's DefaultTopic
	return r, nil
}

func (p *passRecords) Serialize(v *kgo.Record, r *kgo.Record) error {
	p.fresh.Add(1)
	return fmt.Errorf("Serialize called for offset %d: the sink should produce the record itself", v.Offset)
}

// TestSinkProducesFetchedRecords: Kafka → Kafka exactly-once where the
// sink owns the fetched records and produces them as they are, with
// injected failures. Run with -race, it proves the hand-over safe: the
// source reads nothing of a record after emitting it while franz-go's
// producer goroutines set its offset, producer id and attributes; a
// restart fetches fresh records. A read_committed reader finds every
// input record once, with its key, headers and timestamp.
func TestSinkProducesFetchedRecords(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const parallelism, partitions = 2, 3
		count := 6_000
		in := createTopic(t, b.brokers, partitions)
		out := createTopic(t, b.brokers, partitions)
		old := time.Now().Add(-72 * time.Hour).Truncate(time.Millisecond)
		pcl := newClient(t, b.brokers, kgo.DefaultProduceTopic(in), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		for i := range count {
			r := &kgo.Record{Partition: int32(i % partitions), Key: []byte("k" + strconv.Itoa(i)), Value: []byte(strconv.Itoa(i)),
				Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(strconv.Itoa(i))}}, Timestamp: old.Add(time.Duration(i) * time.Millisecond)}
			if i%7 == 0 {
				r.Key = nil // keyless records too
			}
			pcl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Error(err)
				}
			})
		}
		if err := pcl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		pass := &passRecords{}
		plan := faultinject.RandomPlan(11, 4, faultinject.Kinds(), parallelism, int64(count/parallelism/2), 8)
		src, err := NewSource[*kgo.Record](b.brokers, pass, Topics(in), Bounded(Latest()), SourceLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		prefix := uniqueName("owned")
		sk, err := NewSink[*kgo.Record](b.brokers, pass, DefaultTopic(out), DeliveryGuarantee(ExactlyOnce),
			TransactionalIDPrefix(prefix), TransactionTimeout(time.Minute), SinkLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		env := stream.New(stream.Parallelism(parallelism), stream.CheckpointEvery(100*time.Millisecond),
			stream.Restart(restart.FixedDelay(10, 0)), stream.Logger(stream.DiscardLogger()))
		s := stream.FromSource(env, faultinject.WrapSource(src, plan), watermark.None[*kgo.Record](), "in")
		stream.SinkTo(s, faultinject.WrapSink(sk, plan), "out")
		jctx, jcancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer jcancel()
		res, err := env.Execute(jctx, "owned")
		if err != nil {
			t.Fatalf("job: %v (fired %v)", err, plan.Fired())
		}
		t.Logf("%d faults fired %v, %d restarts; %d records produced as fetched", len(plan.Fired()), plan.Fired(), res.Restarts, pass.owned.Load())
		if pass.fresh.Load() != 0 || pass.owned.Load() < int64(count) {
			t.Errorf("sink produced %d fetched records and serialized %d fresh ones; want every record as fetched", pass.owned.Load(), pass.fresh.Load())
		}
		recs := readCommitted(t, b.brokers, out, count, 3*time.Second)
		seen := make([]int, count)
		for _, r := range recs {
			i, err := strconv.Atoi(string(r.Value))
			if err != nil || i < 0 || i >= count {
				t.Fatalf("unexpected value %q", r.Value)
			}
			seen[i]++
			wantKey := "k" + strconv.Itoa(i)
			if i%7 == 0 {
				wantKey = ""
			}
			if string(r.Key) != wantKey || (i%7 == 0) != (r.Key == nil) {
				t.Errorf("record %d: key %q, want %q", i, r.Key, wantKey)
			}
			if len(r.Headers) != 1 || r.Headers[0].Key != "i" || string(r.Headers[0].Value) != strconv.Itoa(i) {
				t.Errorf("record %d: headers %v", i, r.Headers)
			}
			if want := old.Add(time.Duration(i) * time.Millisecond); !r.Timestamp.Equal(want) {
				t.Errorf("record %d: timestamp %v, want %v", i, r.Timestamp, want)
			}
		}
		for i, n := range seen {
			if n != 1 {
				t.Errorf("record %d read %d times, want once", i, n)
			}
		}
		checkNoOpenTransactions(t, b.brokers, prefix)
	})
}
