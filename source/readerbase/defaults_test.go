package readerbase_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/readerbase"
)

// posSplit is a split whose mutable state is *posSplit itself.
type posSplit struct {
	ID   string
	Next int
}

func (s posSplit) SplitID() string { return s.ID }

// onePage returns one batch of three elements, then blocks until ctx is
// done.
type onePage struct{ sent bool }

func (p *onePage) AddSplits([]posSplit) error { return nil }
func (p *onePage) Close() error               { return nil }
func (p *onePage) Fetch(ctx context.Context) (readerbase.Batch[int], error) {
	if p.sent {
		<-ctx.Done()
		return readerbase.Batch[int]{}, nil
	}
	p.sent = true
	return readerbase.Batch[int]{Records: []readerbase.SplitRecords[int]{{SplitID: "a", Records: []int{10, 11, 12}}}}, nil
}

// TestPointerStateDefaults checks that a Config whose state is *S may leave
// InitState and ToSplit nil: the state starts as a copy of the split, and a
// snapshot is a copy of the state, not an alias of it.
func TestPointerStateDefaults(t *testing.T) {
	r, err := readerbase.New(&fakes.ReaderContext{}, readerbase.Config[int, int, posSplit, *posSplit]{
		NewSplitReader: func() (readerbase.SplitReader[int, posSplit], error) { return &onePage{}, nil },
		Emitter: readerbase.EmitterFunc[int, int, *posSplit](func(e int, out source.Output[int], s *posSplit) error {
			out.Collect(e)
			s.Next++
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.AddSplits([]posSplit{{ID: "a", Next: 5}}); err != nil {
		t.Fatal(err)
	}
	var out fakes.Output[int]
	deadline := time.After(10 * time.Second)
	for len(out.Records) < 3 {
		st, err := r.PollNext(&out)
		if err != nil {
			t.Fatal(err)
		}
		if st == source.NothingAvailable && len(out.Records) < 3 {
			select {
			case <-r.Available():
			case <-deadline:
				t.Fatalf("timed out with %v", out.Values())
			}
		}
	}
	snap, err := r.SnapshotState(1)
	if err != nil {
		t.Fatal(err)
	}
	if want := []posSplit{{ID: "a", Next: 8}}; !slices.Equal(snap, want) || !slices.Equal(out.Values(), []int{10, 11, 12}) {
		t.Fatalf("snapshot %v and records %v, want %v and [10 11 12]", snap, out.Values(), want)
	}
	snap[0].Next = 99 // the caller owns the snapshot
	if again, _ := r.SnapshotState(2); again[0].Next != 8 {
		t.Fatalf("the snapshot aliases the state: %v", again)
	}
}
