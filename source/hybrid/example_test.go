package hybrid_test

import (
	"context"
	"fmt"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/hybrid"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// Read a bounded backlog, then switch to a second source: every reader
// finishes the first before any reads the second.
func Example() {
	backlog := datagen.New(func(i int64) string { return fmt.Sprint("backlog-", i) }, datagen.Count(3))
	live := datagen.New(func(i int64) string { return fmt.Sprint("live-", i) }, datagen.Count(2))
	src, err := hybrid.New(hybrid.Of(backlog)).AddSource(hybrid.Of(live)).Build()
	if err != nil {
		fmt.Println(err)
		return
	}

	store := testsink.NewStore[string]()
	env := stream.New(stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[string](), "hybrid"), testsink.NewTwoPhase(store), "sink")
	if _, err := env.Execute(context.Background(), "backlog-then-live"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(store.Committed())
	// Output:
	// [backlog-0 backlog-1 backlog-2 live-0 live-1]
}

// history is a bounded source whose enumerator knows where the data ends,
// the way a file source knows the timestamp of its last file.
type history struct {
	*datagen.Source[int64]
	end int64
}

type historyEnumerator struct {
	source.Enumerator[datagen.Split, datagen.EnumState]
	end int64
}

func (e *historyEnumerator) End() int64 { return e.end }

func (h history) CreateEnumerator(ctx source.EnumeratorContext[datagen.Split]) (source.Enumerator[datagen.Split, datagen.EnumState], error) {
	e, err := h.Source.CreateEnumerator(ctx)
	return &historyEnumerator{e, h.end}, err
}

// live emits the indexes from start on. Its splits carry absolute
// positions, so a restored live source needs no start (like Kafka splits
// carrying offsets).
type live struct {
	*datagen.Source[int64]
	start int64
}

func (l live) CreateEnumerator(ctx source.EnumeratorContext[datagen.Split]) (source.Enumerator[datagen.Split, datagen.EnumState], error) {
	splits := l.InitialSplits()
	for i := range splits {
		splits[i].Next += l.start
		splits[i].End += l.start
	}
	return l.Source.RestoreEnumerator(ctx, datagen.EnumState{Unassigned: splits})
}

// Hand a position over at the switch: the factory of the second source
// reads where the first one ended from its enumerator (Flink's
// SourceSwitchContext.getPreviousEnumerator).
func ExampleBuilder_AddSourceFactory() {
	first := history{datagen.New(func(i int64) int64 { return i }, datagen.Count(5)), 5}
	startLive := func(sc hybrid.SwitchContext) (hybrid.Child[int64], error) {
		var start int64 // restoring after the switch: the splits know their positions
		if prev, ok := sc.PreviousEnumerator().(*historyEnumerator); ok {
			start = prev.End()
		}
		return hybrid.Of[int64](live{datagen.New(func(i int64) int64 { return i }, datagen.Count(3)), start}), nil
	}
	src, err := hybrid.New(hybrid.Of[int64](first)).AddSourceFactory(startLive, source.Bounded).Build()
	if err != nil {
		fmt.Println(err)
		return
	}

	store := testsink.NewStore[int64]()
	env := stream.New(stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[int64](), "hybrid"), testsink.NewTwoPhase(store), "sink")
	if _, err := env.Execute(context.Background(), "handover"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(store.Committed())
	// Output:
	// [0 1 2 3 4 5 6 7]
}
