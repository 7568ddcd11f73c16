package kafka

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/metrics"
)

// fetchCounter counts the records of every batch a client decodes.
type fetchCounter struct{ records atomic.Int64 }

func (h *fetchCounter) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	h.records.Add(int64(m.NumRecords))
}

// fetchSplits runs the split reader until the given number of splits have
// finished (at most 2000 fetches, each bounded by 10s) and returns the
// offsets read per partition.
func fetchSplits(t *testing.T, p *partReader, finished int) map[int32][]int64 {
	t.Helper()
	got := map[int32][]int64{}
	for i, fin := 0, 0; fin < finished; i++ {
		if i == 2000 {
			t.Fatalf("%d of %d splits finished after %d fetches", fin, finished, i)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		b, err := p.Fetch(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, sr := range b.Records {
			for _, r := range sr.Records {
				got[r.Partition] = append(got[r.Partition], r.Offset)
			}
		}
		fin += len(b.Finished)
	}
	return got
}

func checkOffsets(t *testing.T, got []int64, from, to int64) {
	t.Helper()
	if int64(len(got)) != to-from {
		t.Fatalf("read %d offsets, want %d..%d", len(got), from, to-1)
	}
	for i, o := range got {
		if o != from+int64(i) {
			t.Fatalf("offset #%d is %d, want %d", i, o, from+int64(i))
		}
	}
}

// TestSplitReaderFetchesOnce reads bounded splits of three partitions that
// finish one after another and checks that every record was fetched and
// decoded once: a finished partition is paused, not removed, because
// removing one makes franz-go drop the other partitions' buffered records
// and fetch them again (twice the data on a real broker). Then a finished
// partition is assigned again at an earlier offset and read again.
func TestSplitReaderFetchesOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const perPartition = 20_000
		topic := createTopic(t, b.brokers, 3)
		cl := newClient(t, b.brokers, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		// Partitions of different lengths finish at different times.
		for p := range int32(3) {
			for i := range perPartition * (int(p) + 1) / 3 {
				cl.Produce(t.Context(), &kgo.Record{Partition: p, Value: strconv.AppendInt(nil, int64(i), 10)}, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce: %v", err)
					}
				})
			}
		}
		if err := cl.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		ends, err := kadm.NewClient(cl).ListEndOffsets(t.Context(), topic)
		if err != nil {
			t.Fatal(err)
		}
		var splits []Split
		var total int64
		ends.Each(func(o kadm.ListedOffset) {
			splits = append(splits, Split{Topic: topic, Partition: o.Partition, Offset: 0, StopOffset: o.Offset})
			total += o.Offset
		})

		cfg := defaultSourceConfig()
		cfg.brokers = b.brokers
		cfg.logger = quiet
		h := &fetchCounter{}
		cfg.clientOpts = []kgo.Opt{kgo.WithHooks(h)}
		rch := newReach(quiet, "kafka source", cfg.brokers, cfg.connTimeout)
		defer rch.close()
		p, err := newSplitReader(&cfg, &partMetricsSet{group: metrics.Discard(), parts: map[string]*partMetrics{}}, rch)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.AddSplits(splits); err != nil {
			t.Fatal(err)
		}
		got := fetchSplits(t, p, 3)
		for _, s := range splits {
			checkOffsets(t, got[s.Partition], 0, s.StopOffset)
		}
		if n := h.records.Load(); n != total {
			t.Errorf("decoded %d records to read %d: finished partitions made the client fetch again", n, total)
		}

		// Partition 0 again, from offset 1000 to 2000.
		if err := p.AddSplits([]Split{{Topic: topic, Partition: 0, Offset: 1000, StopOffset: 2000}}); err != nil {
			t.Fatal(err)
		}
		got = fetchSplits(t, p, 1)
		checkOffsets(t, got[0], 1000, 2000)
		if len(got[1])+len(got[2]) > 0 {
			t.Errorf("read %d records of finished partitions 1 and 2", len(got[1])+len(got[2]))
		}
	})
}
