package readerbase_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/sluice-io/sluice/source/readerbase"
)

// ctxReader is a SplitReader whose splits named "u…" never end: a Fetch
// with only those sends its ctx to fetching and blocks until the ctx is
// done. Any other split is one record, finished by the next Fetch.
type ctxReader struct {
	fetching chan<- context.Context
	splits   []split
}

func (c *ctxReader) AddSplits(ss []split) error { c.splits = append(c.splits, ss...); return nil }
func (c *ctxReader) Close() error               { return nil }

func (c *ctxReader) Fetch(ctx context.Context) (readerbase.Batch[rec], error) {
	for i, s := range c.splits {
		if !strings.HasPrefix(s.ID, "u") {
			c.splits = slices.Delete(c.splits, i, i+1)
			return readerbase.Batch[rec]{
				Records:  []readerbase.SplitRecords[rec]{{SplitID: s.ID, Records: []rec{{Split: s.ID}}}},
				Finished: []string{s.ID},
			}, nil
		}
	}
	c.fetching <- ctx
	<-ctx.Done()
	return readerbase.Batch[rec]{}, ctx.Err()
}

// TestWakeUpInterruptsOnlyFetchesThatMissedTheTask: handing a split to a
// fetcher that waits for work must not interrupt the Fetch the fetcher
// starts after taking that split (before the fix it did whenever the
// fetcher ran between the hand-over's signal and its wake-up, which cut
// short the file source's open of the split on s3:// and lost the
// split). A split handed over during a Fetch that began before it does
// interrupt that Fetch, with the cause ErrWakeUp; Close stops a Fetch
// with another cause.
func TestWakeUpInterruptsOnlyFetchesThatMissedTheTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fetching := make(chan context.Context, 16)
		cfg := readerbase.Config[rec, rec, split, *state]{
			NewSplitReader: func() (readerbase.SplitReader[rec, split], error) {
				return &ctxReader{fetching: fetching}, nil
			},
			Emitter:   readerbase.EmitterFunc[rec, rec, *state](emitRec),
			InitState: func(s split) *state { return &state{id: s.ID, next: s.Next} },
			ToSplit:   func(s *state) split { return split{ID: s.id, Next: s.next} },
		}
		r, err := readerbase.New(newFakeContext(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		out := newFakeOutput()

		// Split a is read and finished; the fetcher then waits for work.
		if err := r.AddSplits([]split{{ID: "a"}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, err := r.PollNext(out); err != nil || len(out.all) != 1 {
			t.Fatalf("PollNext: %v, %d records; want split a's record", err, len(out.all))
		}

		// Hand over u1 and let the fetcher take it and start its Fetch
		// before the hand-over returns.
		var took context.Context
		readerbase.SetTestHookEnqueued(t, func() { took = <-fetching })
		if err := r.AddSplits([]split{{ID: "u1"}}); err != nil {
			t.Fatal(err)
		}
		readerbase.SetTestHookEnqueued(t, nil)
		synctest.Wait()
		if cause := context.Cause(took); cause != nil {
			t.Fatalf("the Fetch that took split u1 was interrupted (cause %v) by the hand-over of u1 itself", cause)
		}

		// u2 arrives during that Fetch: it is woken up.
		if err := r.AddSplits([]split{{ID: "u2"}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if cause := context.Cause(took); !errors.Is(cause, readerbase.ErrWakeUp) {
			t.Fatalf("the Fetch during the hand-over of u2 ended with cause %v, want ErrWakeUp", cause)
		}
		var next context.Context
		select {
		case next = <-fetching:
		default:
			t.Fatal("no Fetch after the wake-up")
		}
		if cause := context.Cause(next); cause != nil {
			t.Fatalf("the Fetch after the wake-up has a done ctx (cause %v)", cause)
		}

		if err := r.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if cause := context.Cause(next); cause == nil || errors.Is(cause, readerbase.ErrWakeUp) {
			t.Errorf("after Close the Fetch's ctx has cause %v, want the stop's", cause)
		}
		if st, err := r.PollNext(out); !errors.Is(err, readerbase.ErrClosed) {
			t.Errorf("PollNext after Close = %v, %v; want ErrClosed", st, err)
		}
	})
}
