package kafka

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// TestSourceCommitsOffsetsOnCheckpoint reads a topic to its end with a
// group id and checks that the group's committed offsets reach the end
// (they are committed when checkpoints complete) and that the offset
// gauges are exported.
func TestSourceCommitsOffsetsOnCheckpoint(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		topic := createTopic(t, b.brokers, 2)
		fillTopic(t, b.brokers, topic, 2, 1000, 100)
		group := uniqueName("g")
		src, err := NewSource(b.brokers, StringDeserializer(), Topics(topic), Bounded(Latest()), GroupID(group), SourceLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		reg := metrics.NewRegistry()
		store := testsink.NewStore[string]()
		env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(50*time.Millisecond),
			stream.Logger(stream.DiscardLogger()), stream.Metrics(reg))
		stream.SinkTo(stream.FromSource(env, src, watermark.None[string](), "kafka"), testsink.NewTwoPhase(store), "collect")
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if _, err := env.Execute(ctx, "offsets"); err != nil {
			t.Fatal(err)
		}
		if got := len(store.Committed()); got != 1000 {
			t.Fatalf("read %d records, want 1000", got)
		}
		adm := kadm.NewClient(newClient(t, b.brokers))
		ends, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		got, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		ends.Each(func(o kadm.ListedOffset) {
			c, ok := got.Lookup(o.Topic, o.Partition)
			if !ok || c.At != o.Offset {
				t.Errorf("partition %d: committed %v (found %v), want the end offset %d", o.Partition, c.At, ok, o.Offset)
			}
		})
		if cur := reg.Sum("currentOffset"); cur != ends[topic][0].Offset+ends[topic][1].Offset {
			t.Errorf("sum of currentOffset gauges = %d, want %d", cur, ends[topic][0].Offset+ends[topic][1].Offset)
		}
	})
}

// TestSourceDiscoversNewPartitions runs an unbounded source, adds a
// partition while it runs, and checks that records of the new partition
// are read from its beginning.
func TestSourceDiscoversNewPartitions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		topic := createTopic(t, b.brokers, 1)
		prod := newClient(t, b.brokers, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		produce := func(p int32, vals ...int) {
			for _, v := range vals {
				var err error
				// The producer learns of a new partition with its next
				// metadata refresh.
				for range 100 {
					if err = prod.ProduceSync(t.Context(), &kgo.Record{Partition: p, Value: []byte(strconv.Itoa(v))}).FirstErr(); err == nil {
						break
					}
					prod.ForceMetadataRefresh()
					time.Sleep(50 * time.Millisecond)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		produce(0, 1, 2)
		src, err := NewSource(b.brokers, StringDeserializer(), Topics(topic), PartitionDiscovery(100*time.Millisecond), SourceLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		store := testsink.NewStore[string]()
		env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(50*time.Millisecond), stream.Logger(stream.DiscardLogger()))
		stream.SinkTo(stream.FromSource(env, src, watermark.None[string](), "kafka"), testsink.NewTwoPhase(store), "collect")
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		h, err := env.Start(ctx, "discovery")
		if err != nil {
			t.Fatal(err)
		}
		waitFor := func(n int) {
			t.Helper()
			for i := 0; i < 600 && len(store.Committed()) < n; i++ {
				time.Sleep(50 * time.Millisecond)
			}
			if got := len(store.Committed()); got < n {
				t.Fatalf("committed %d records, want %d", got, n)
			}
		}
		waitFor(2)
		adm := kadm.NewClient(newClient(t, b.brokers))
		if _, err := adm.CreatePartitions(ctx, 1, topic); err != nil {
			t.Fatal(err)
		}
		// Produce to the new partition before discovery may see it: it
		// must still be read from its beginning.
		produce(1, 3, 4)
		produce(0, 5)
		waitFor(5)
		h.Cancel()
		_, _ = h.Wait()
		got := map[string]int{}
		for _, v := range store.Committed() {
			got[v]++
		}
		for _, v := range []string{"1", "2", "3", "4", "5"} {
			if got[v] != 1 {
				t.Errorf("record %s read %d times, want once (all: %v)", v, got[v], got)
			}
		}
	})
}

// TestSourcePatternAndDeletedTopic subscribes by pattern to two topics,
// deletes one while the job runs, and checks that the job goes on reading
// the other without a failure.
func TestSourcePatternAndDeletedTopic(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		base := uniqueName("pat")
		adm := kadm.NewClient(newClient(t, b.brokers))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		a, c := base+"-a", base+"-c"
		if _, err := adm.CreateTopics(ctx, 1, 1, nil, a, c); err != nil {
			t.Fatal(err)
		}
		prod := newClient(t, b.brokers)
		produce := func(topic, v string) {
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		produce(a, "a1")
		produce(c, "c1")
		src, err := NewSource(b.brokers, StringDeserializer(), TopicPattern(regexp.MustCompile("^"+regexp.QuoteMeta(base)+"-")),
			PartitionDiscovery(100*time.Millisecond), SourceLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		store := testsink.NewStore[string]()
		env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(50*time.Millisecond), stream.Logger(stream.DiscardLogger()))
		stream.SinkTo(stream.FromSource(env, src, watermark.None[string](), "kafka"), testsink.NewTwoPhase(store), "collect")
		h, err := env.Start(ctx, "pattern")
		if err != nil {
			t.Fatal(err)
		}
		waitFor := func(n int) {
			t.Helper()
			for i := 0; i < 600 && len(store.Committed()) < n; i++ {
				time.Sleep(50 * time.Millisecond)
			}
			if got := len(store.Committed()); got < n {
				t.Fatalf("committed %d records %v, want %d", got, store.Committed(), n)
			}
		}
		waitFor(2)
		if _, err := adm.DeleteTopics(ctx, a); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // time for a deleted-topic error to surface
		produce(c, "c2")
		waitFor(3)
		h.Cancel()
		res, _ := h.Wait()
		if res != nil && res.Restarts != 0 {
			t.Errorf("%d restarts after deleting a topic: %v", res.Restarts, res.Failures)
		}
		got := store.Committed()
		slices.Sort(got)
		if want := []string{"a1", "c1", "c2"}; !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}

// TestSourceStartingOffsets reads a one-partition topic of ten records
// (timestamps 1000, 2000, …) bounded at the latest offset, from each kind
// of starting offset.
func TestSourceStartingOffsets(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		topic := createTopic(t, b.brokers, 1)
		prod := newClient(t, b.brokers, kgo.DefaultProduceTopic(topic))
		for i := range 10 {
			r := &kgo.Record{Value: []byte(strconv.Itoa(i)), Timestamp: time.UnixMilli(int64(i+1) * 1000)}
			if err := prod.ProduceSync(t.Context(), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		group := uniqueName("g")
		adm := kadm.NewClient(newClient(t, b.brokers))
		os := kadm.Offsets{}
		os.AddOffset(topic, 0, 7, -1)
		if _, err := adm.CommitOffsets(t.Context(), group, os); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name  string
			opts  []SourceOption
			first int // first value read; 10 = none
		}{
			{"earliest", []SourceOption{StartingOffsets(Earliest())}, 0},
			{"latest", []SourceOption{StartingOffsets(Latest())}, 10},
			{"specific", []SourceOption{StartingOffsets(AtOffsets(map[string]map[int32]int64{topic: {0: 4}}, Earliest()))}, 4},
			{"timestamp", []SourceOption{StartingOffsets(AtTimestamp(6000))}, 5},
			{"committed", []SourceOption{StartingOffsets(Committed(Earliest())), GroupID(group)}, 7},
			{"committed without offset", []SourceOption{StartingOffsets(Committed(Latest())), GroupID(uniqueName("g"))}, 10},
			{"stop at timestamp", []SourceOption{StartingOffsets(Earliest()), Bounded(AtTimestamp(3000))}, 0},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				opts := append([]SourceOption{Topics(topic), Bounded(Latest()), SourceLogger(quiet)}, c.opts...)
				src, err := NewSource(b.brokers, StringDeserializer(), opts...)
				if err != nil {
					t.Fatal(err)
				}
				store := testsink.NewStore[string]()
				env := stream.New(stream.Parallelism(1), stream.Logger(stream.DiscardLogger()))
				stream.SinkTo(stream.FromSource(env, src, watermark.None[string](), "kafka"), testsink.NewTwoPhase(store), "collect")
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				if _, err := env.Execute(ctx, "start"); err != nil {
					t.Fatal(err)
				}
				last := 10
				if c.name == "stop at timestamp" {
					last = 2 // records with timestamps 1000 and 2000
				}
				var want []string
				for i := c.first; i < last; i++ {
					want = append(want, strconv.Itoa(i))
				}
				if got := store.Committed(); !slices.Equal(got, want) {
					t.Errorf("got %v, want %v", got, want)
				}
			})
		}
	})
}
