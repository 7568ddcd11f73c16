package kafka

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/connectortest/fakes"
)

// runAsyncCalls runs the recorded CallAsync calls from index from on, once
// each, in order (calls a handler records are run too), as the runtime
// would; it returns how many calls there were in the end.
func runAsyncCalls(t *testing.T, c *fakes.EnumeratorContext[Split], from int) int {
	t.Helper()
	for i := from; i < len(c.Async) && i < from+10; i++ {
		a := c.Async[i]
		res, err := a.Fn(t.Context())
		a.Handler(res, err)
	}
	return len(c.Async)
}

// TestEnumeratorOnTheKit checks the Kafka enumerator built on
// enumerate.Discovered against kfake: the first discovery's partitions are
// resolved with the starting offsets and pushed to their owners; the state
// keeps its format (Assigned, Pending, Initialized), restores from JSON
// written by the enumerator before it used the kit, and a partition found
// after the first discovery starts at the earliest offset.
func TestEnumeratorOnTheKit(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for p := range int32(3) {
		for range 5 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	src, err := NewSource(brokers, StringDeserializer(), Topics("t"), StartingOffsets(Latest()), PartitionDiscovery(time.Hour))
	if err != nil {
		t.Fatal(err)
	}

	c := &fakes.EnumeratorContext[Split]{Parallel: 2}
	c.Register(0, 1)
	e := newEnumerator(c, &src.cfg, nil)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	runAsyncCalls(t, c, 0)
	if c.Failed != nil {
		t.Fatal(c.Failed)
	}
	got := c.AllAssigned()
	slices.SortFunc(got, func(a, b Split) int { return int(a.Partition - b.Partition) })
	want := []Split{{"t", 0, 5, NoStop}, {"t", 1, 5, NoStop}, {"t", 2, 5, NoStop}}
	if !slices.Equal(got, want) {
		t.Fatalf("first discovery assigned %v, want %v (latest offsets)", got, want)
	}
	for sub, ss := range c.Assigned {
		for _, s := range ss {
			if o := owner(s.Topic, s.Partition, 2); o != sub {
				t.Errorf("%s assigned to %d, its owner is %d", s.SplitID(), sub, o)
			}
		}
	}
	st, err := e.SnapshotState(1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Assigned, []string{"t-0", "t-1", "t-2"}) || len(st.Pending) != 0 || !st.Initialized {
		t.Fatalf("state %+v, want all three assigned, none pending, initialized", st)
	}

	// A state as the enumerator wrote it before the kit: t-0 assigned, t-1
	// pending with its position, t-2 not known yet.
	var old EnumState
	if err := json.Unmarshal([]byte(`{"assigned":["t-0"],"pending":[{"topic":"t","partition":1,"offset":3,"stop_offset":-1}],"initialized":true}`), &old); err != nil {
		t.Fatal(err)
	}
	c2 := &fakes.EnumeratorContext[Split]{Parallel: 2}
	c2.Register(0, 1)
	r := newEnumerator(c2, &src.cfg, &old)
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c2.AllAssigned(); !slices.Equal(got, []Split{{"t", 1, 3, NoStop}}) {
		t.Fatalf("restored pending split: assigned %v at start, want [t-1 at 3]", got)
	}
	runAsyncCalls(t, c2, 0)
	if c2.Failed != nil {
		t.Fatal(c2.Failed)
	}
	got = c2.AllAssigned()
	if want := []Split{{"t", 1, 3, NoStop}, {"t", 2, 0, NoStop}}; !slices.Equal(got, want) {
		t.Fatalf("after discovery: assigned %v, want %v (t-2 new after the first discovery: earliest)", got, want)
	}
	st, err = r.SnapshotState(2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Assigned, []string{"t-0", "t-1", "t-2"}) || len(st.Pending) != 0 || !st.Initialized {
		t.Fatalf("restored state %+v, want all three assigned", st)
	}
}
