package source_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/sluice-io/sluice/connectors/print"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// A complete bounded source: each split is one sentence and carries the
// index of its next word. The enumerator hands out sentences on request
// (pull assignment); the reader emits words and snapshots its position.

type sentence struct {
	ID    string
	Words []string
	Next  int
}

func (s sentence) SplitID() string { return s.ID }

type words struct{ text []string }

func (w words) Boundedness() source.Boundedness { return source.Bounded }
func (w words) CreateEnumerator(ctx source.EnumeratorContext[sentence]) (source.Enumerator[sentence, []sentence], error) {
	var pending []sentence
	for i, t := range w.text {
		pending = append(pending, sentence{ID: fmt.Sprint("s", i), Words: strings.Fields(t)})
	}
	return &enumerator{ctx: ctx, pending: pending}, nil
}
func (w words) RestoreEnumerator(ctx source.EnumeratorContext[sentence], pending []sentence) (source.Enumerator[sentence, []sentence], error) {
	return &enumerator{ctx: ctx, pending: pending}, nil
}
func (w words) CreateReader(ctx source.ReaderContext) (source.Reader[string, sentence], error) {
	return &reader{ctx: ctx}, nil
}
func (w words) SplitSerializer() serde.Versioned[sentence] { return serde.JSON[sentence](1) }
func (w words) EnumeratorStateSerializer() serde.Versioned[[]sentence] {
	return serde.JSON[[]sentence](1)
}

type enumerator struct {
	ctx     source.EnumeratorContext[sentence]
	pending []sentence
}

func (e *enumerator) Start(context.Context) error { return nil }
func (e *enumerator) HandleSplitRequest(subtask int, _ string) error {
	if len(e.pending) == 0 {
		e.ctx.SignalNoMoreSplits(subtask)
		return nil
	}
	next := e.pending[0]
	e.pending = e.pending[1:]
	return e.ctx.AssignSplits(map[int][]sentence{subtask: {next}})
}
func (e *enumerator) AddSplitsBack(s []sentence, _ int) error {
	e.pending = append(e.pending, s...)
	return nil
}
func (e *enumerator) AddReader(int) error { return nil }
func (e *enumerator) SnapshotState(int64) ([]sentence, error) {
	return append([]sentence(nil), e.pending...), nil
}
func (e *enumerator) Close() error { return nil }

type reader struct {
	ctx    source.ReaderContext
	splits []sentence
	noMore bool
}

func (r *reader) Start(context.Context) error { r.ctx.SendSplitRequest(); return nil }
func (r *reader) PollNext(out source.Output[string]) (source.InputStatus, error) {
	if len(r.splits) == 0 {
		if r.noMore {
			return source.EndOfInput, nil
		}
		return source.NothingAvailable, nil
	}
	s := &r.splits[0]
	for ; s.Next < len(s.Words); s.Next++ {
		out.Collect(s.Words[s.Next])
	}
	r.splits = r.splits[1:]
	r.ctx.SendSplitRequest()
	return source.MoreAvailable, nil
}
func (r *reader) Available() <-chan struct{}   { return nil } // never needed: the runtime polls again after AddSplits and no-more-splits
func (r *reader) AddSplits(s []sentence) error { r.splits = append(r.splits, s...); return nil }
func (r *reader) NotifyNoMoreSplits()          { r.noMore = true }
func (r *reader) SnapshotState(int64) ([]sentence, error) {
	return append([]sentence(nil), r.splits...), nil
}
func (r *reader) Close() error { return nil }

func Example() {
	env := stream.New(stream.Logger(stream.DiscardLogger()))
	src := words{text: []string{"exactly once", "from Go"}}
	upper := stream.Map(stream.FromSource(env, src, watermark.None[string](), "words"), strings.ToUpper, stream.Name("upper"))
	stream.SinkTo(upper, print.New[string](print.To(os.Stdout)), "print")
	if _, err := env.Execute(context.Background(), "words"); err != nil {
		fmt.Println(err)
	}
	// Output:
	// EXACTLY
	// ONCE
	// FROM
	// GO
}
