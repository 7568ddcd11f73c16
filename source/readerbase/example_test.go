package readerbase_test

import (
	"context"
	"fmt"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/readerbase"
)

// lineSplit is a split of an in-memory "file": its name and the index of
// the next line to read.
type lineSplit struct {
	Name string
	Next int
}

func (s lineSplit) SplitID() string { return s.Name }

// lineReader is the SplitReader: it reads up to two lines per Fetch, from
// each of its splits in turn. A real one would block on I/O in Fetch and
// return when ctx is done.
type lineReader struct {
	files map[string][]string
	open  []*lineSplit
}

func (r *lineReader) AddSplits(splits []lineSplit) error {
	for _, s := range splits {
		r.open = append(r.open, &s)
	}
	return nil
}

func (r *lineReader) Fetch(ctx context.Context) (readerbase.Batch[string], error) {
	if len(r.open) == 0 { // not called without splits; shown for completeness
		<-ctx.Done()
		return readerbase.Batch[string]{}, ctx.Err()
	}
	s := r.open[0]
	r.open = append(r.open[1:], s)
	lines := r.files[s.Name]
	end := min(s.Next+2, len(lines))
	b := readerbase.Batch[string]{
		Records: []readerbase.SplitRecords[string]{{SplitID: s.Name, Records: lines[s.Next:end]}},
	}
	s.Next = end
	if end == len(lines) {
		b.Finished = []string{s.Name}
		r.open = r.open[:len(r.open)-1]
	}
	return b, nil
}

func (r *lineReader) Close() error { return nil }

// printOutput stands in for the runtime's output.
type printOutput struct{}

func (printOutput) Collect(v string)                        { fmt.Println(v) }
func (printOutput) CollectAt(v string, _ int64)             { fmt.Println(v) }
func (printOutput) EmitWatermark(int64)                     {}
func (printOutput) MarkIdle()                               {}
func (o printOutput) ForSplit(string) source.Output[string] { return o }
func (printOutput) ReleaseSplit(id string)                  { fmt.Println("finished", id) }

// exampleContext stands in for the runtime's ReaderContext.
type exampleContext struct{}

func (exampleContext) SubtaskIndex() int                  { return 0 }
func (exampleContext) Parallelism() int                   { return 1 }
func (exampleContext) Attempt() int                       { return 0 }
func (exampleContext) SendSplitRequest()                  {}
func (exampleContext) JobID() string                      { return "example" }
func (exampleContext) SendEventToEnumerator(source.Event) {}
func (exampleContext) Metrics() metrics.Group             { return metrics.Discard() }

func Example() {
	files := map[string][]string{
		"a.txt": {"alpha", "beta", "gamma"},
		"b.txt": {"one", "two"},
	}
	r, err := readerbase.New(exampleContext{}, readerbase.Config[string, string, lineSplit, *lineSplit]{
		NewSplitReader: func() (readerbase.SplitReader[string, lineSplit], error) {
			return &lineReader{files: files}, nil
		},
		// The emitter runs on the task goroutine and advances the split's
		// state, so a snapshot resumes after the last emitted line.
		Emitter: readerbase.EmitterFunc[string, string, *lineSplit](
			func(line string, out source.Output[string], s *lineSplit) error {
				out.Collect(s.Name + ": " + line)
				s.Next++
				return nil
			}),
		// The state is *lineSplit, so InitState and ToSplit may be left
		// out: the state is a copy of the split, a snapshot a copy of it.
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()

	// What the runtime does on the subtask's goroutine.
	if err := r.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	if err := r.AddSplits([]lineSplit{{Name: "a.txt"}, {Name: "b.txt"}}); err != nil {
		fmt.Println(err)
		return
	}
	r.NotifyNoMoreSplits()
	for {
		status, err := r.PollNext(printOutput{})
		if err != nil {
			fmt.Println(err)
			return
		}
		if status == source.EndOfInput {
			break
		}
		if status == source.NothingAvailable {
			<-r.Available()
		}
	}
	// Output:
	// a.txt: alpha
	// a.txt: beta
	// b.txt: one
	// b.txt: two
	// finished b.txt
	// a.txt: gamma
	// finished a.txt
}

// A BatchEmitter gets each split's lines of a fetch in one call and moves
// the split's position once per group.
func ExampleBatchEmitterFunc() {
	files := map[string][]string{"a.txt": {"alpha", "beta", "gamma"}}
	r, err := readerbase.New(exampleContext{}, readerbase.Config[string, string, lineSplit, *lineSplit]{
		NewSplitReader: func() (readerbase.SplitReader[string, lineSplit], error) {
			return &lineReader{files: files}, nil
		},
		Emitter: readerbase.BatchEmitterFunc[string, string, *lineSplit](
			func(lines []string, out source.Output[string], s *lineSplit) error {
				fmt.Printf("%d lines of %s from line %d\n", len(lines), s.Name, s.Next)
				for _, line := range lines {
					out.Collect(line)
				}
				s.Next += len(lines)
				return nil
			}),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	if err := r.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	if err := r.AddSplits([]lineSplit{{Name: "a.txt"}}); err != nil {
		fmt.Println(err)
		return
	}
	r.NotifyNoMoreSplits()
	for {
		status, err := r.PollNext(printOutput{})
		if err != nil {
			fmt.Println(err)
			return
		}
		if status == source.EndOfInput {
			break
		}
		if status == source.NothingAvailable {
			<-r.Available()
		}
	}
	// Output:
	// 2 lines of a.txt from line 0
	// alpha
	// beta
	// 1 lines of a.txt from line 2
	// gamma
	// finished a.txt
}
