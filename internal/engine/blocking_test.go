package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/readerbase"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// blockingSource has one split whose SplitReader blocks in Fetch until
// release is closed, then returns n records.
type blockingSource struct {
	n       int64
	release chan struct{}
	fetches chan struct{} // a token when Fetch starts blocking
}

func (s *blockingSource) Boundedness() source.Boundedness { return source.Bounded }
func (s *blockingSource) CreateEnumerator(ctx source.EnumeratorContext[rangeSplit]) (source.Enumerator[rangeSplit, enumState], error) {
	return &scriptEnum{s: &scriptSource{
		onRestore: func(e *scriptEnum) {},
	}, ctx: ctx, pending: []rangeSplit{{ID: "only", End: s.n}}}, nil
}
func (s *blockingSource) RestoreEnumerator(ctx source.EnumeratorContext[rangeSplit], st enumState) (source.Enumerator[rangeSplit, enumState], error) {
	return &scriptEnum{s: &scriptSource{}, ctx: ctx, pending: st.Unassigned, restored: true}, nil
}
func (s *blockingSource) SplitSerializer() serde.Versioned[rangeSplit] {
	return serde.JSON[rangeSplit](1)
}
func (s *blockingSource) EnumeratorStateSerializer() serde.Versioned[enumState] {
	return serde.JSON[enumState](1)
}

func (s *blockingSource) CreateReader(ctx source.ReaderContext) (source.Reader[rec, rangeSplit], error) {
	return readerbase.New(ctx, readerbase.Config[rec, rec, rangeSplit, *rangeSplit]{
		NewSplitReader: func() (readerbase.SplitReader[rec, rangeSplit], error) {
			return &blockingSplitReader{s: s}, nil
		},
		Emitter: readerbase.EmitterFunc[rec, rec, *rangeSplit](func(e rec, out source.Output[rec], st *rangeSplit) error {
			out.Collect(e)
			st.Next = e.Pos + 1
			return nil
		}),
		InitState: func(s rangeSplit) *rangeSplit { return &s },
		ToSplit:   func(s *rangeSplit) rangeSplit { return *s },
	}, readerbase.PullSplits())
}

type blockingSplitReader struct {
	s      *blockingSource
	splits []rangeSplit
}

func (r *blockingSplitReader) Fetch(ctx context.Context) (readerbase.Batch[rec], error) {
	select {
	case r.s.fetches <- struct{}{}:
	default:
	}
	select {
	case <-r.s.release:
	case <-ctx.Done():
		return readerbase.Batch[rec]{}, ctx.Err()
	}
	var b readerbase.Batch[rec]
	for _, sp := range r.splits {
		var recs []rec
		for p := sp.Next; p < sp.End; p++ {
			recs = append(recs, rec{sp.ID, p})
		}
		b.Records = append(b.Records, readerbase.SplitRecords[rec]{SplitID: sp.ID, Records: recs})
		b.Finished = append(b.Finished, sp.ID)
	}
	r.splits = nil
	return b, nil
}

func (r *blockingSplitReader) AddSplits(splits []rangeSplit) error {
	r.splits = append(r.splits, splits...)
	return nil
}

func (r *blockingSplitReader) Close() error { return nil }

// TestBlockedFetcherDoesNotBlockTask: while the reader's fetcher is blocked
// in Fetch, the task goroutine keeps serving its mailbox, so checkpoints
// keep completing. Then the fetch returns and the job finishes.
func TestBlockedFetcherDoesNotBlockTask(t *testing.T) {
	src := &blockingSource{n: 100, release: make(chan struct{}), fetches: make(chan struct{}, 1)}
	store := testsink.NewStore[rec]()
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(10*time.Millisecond), stream.Logger(engine.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[rec](), "blocking"), testsink.NewTwoPhase(store), "sink")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	h, err := env.Start(ctx, "blocked")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-src.fetches:
	case <-ctx.Done():
		t.Fatal("Fetch never started")
	}
	// Wait, bounded, for five checkpoints to complete while Fetch blocks.
	waitCheckpoints(t, h, 5)
	close(src.release)
	res, err := h.Wait()
	if err != nil {
		t.Fatal(err)
	}
	got := store.Committed()
	expectExactlyOnce(t, []rangeSplit{{ID: "only", End: 100}}, got)
	if res.Checkpoints.Completed < 6 {
		t.Errorf("got %d checkpoints, want at least 6 (5 while blocked + final)", res.Checkpoints.Completed)
	}
}
