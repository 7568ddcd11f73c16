package enumerate_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/enumerate"
)

// page is a split: an endpoint and the cursor to resume from.
type page struct{ URL, Cursor string }

func (p page) SplitID() string { return p.URL }

// A bounded source with pull assignment: each request gets the next split;
// once the pool is empty, a request is answered with no-more-splits.
func ExampleNewFixed() {
	ctx := &fakes.EnumeratorContext[page]{Parallel: 2}
	ctx.Register(0, 1)
	e := enumerate.NewFixed(ctx, []page{{URL: "/a"}, {URL: "/b"}, {URL: "/c"}}, source.Bounded)
	_ = e.Start(context.Background())
	for _, sub := range []int{0, 1, 0, 1} {
		_ = e.HandleSplitRequest(sub, "local")
	}
	fmt.Println("subtask 0:", ctx.Assigned[0], "subtask 1:", ctx.Assigned[1])
	fmt.Println("no more splits:", ctx.NoMoreSplits)
	st, _ := e.SnapshotState(1)
	fmt.Println("state:", st)
	// Output:
	// subtask 0: [{/a } {/c }] subtask 1: [{/b }]
	// no more splits: map[1:1]
	// state: []
}

// Push assignment by an owner function: each split goes to its reader as
// soon as that reader is registered; a bounded source then tells every
// reader that it gets nothing more.
func ExamplePush() {
	ctx := &fakes.EnumeratorContext[page]{Parallel: 2}
	ctx.Register(0, 1)
	owner := func(p page, parallelism int) int { return len(p.URL) % parallelism }
	e := enumerate.NewFixed(ctx, []page{{URL: "/a"}, {URL: "/bb"}}, source.Bounded, enumerate.Push(owner))
	_ = e.Start(context.Background())
	fmt.Println(ctx.Assigned, ctx.NoMoreSplits)
	// Output:
	// map[0:[{/a }] 1:[{/bb }]] map[0:1 1:1]
}

// An unbounded source that lists its splits every 10 seconds and hands out
// the ones it has not seen before.
func ExampleNewDiscovered() {
	ctx := &fakes.EnumeratorContext[page]{Parallel: 1}
	ctx.Register(0)
	listing := []page{{URL: "/a"}}
	e := enumerate.NewDiscovered(ctx, enumerate.Discovery[page]{
		Discover: func(context.Context) ([]page, error) { return listing, nil },
		Interval: 10 * time.Second,
	}, source.ContinuousUnbounded, enumerate.DiscoveredState[page]{}, enumerate.Push(func(page, int) int { return 0 }))
	_ = e.Start(context.Background())

	// The fake records CallAsync; run the discovery twice by hand.
	discover := func() {
		res, err := ctx.Async[0].Fn(context.Background())
		ctx.Async[0].Handler(res, err)
	}
	discover()
	listing = append(listing, page{URL: "/b"})
	discover()
	st, _ := e.SnapshotState(1)
	fmt.Println("assigned:", ctx.Assigned[0])
	fmt.Println("every", ctx.Async[0].Period, "known:", st.Known)
	// Output:
	// assigned: [{/a } {/b }]
	// every 10s known: [/a /b]
}
