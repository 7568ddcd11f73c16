package sink_test

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// vault is a toy external system with transactions: staged data is
// invisible until committed; committing twice is noticed.
type vault struct {
	mu        sync.Mutex
	staged    map[string][]int64
	committed map[string][]int64
}

// txn is the committable: the name of a staged transaction.
type txn struct{ Name string }

// vaultSink is a two-phase sink: writers stage at each checkpoint,
// committers commit after it completes.
type vaultSink struct{ v *vault }

// CreateWriter returns a CommittingWriter: a two-phase sink whose writer
// has no PrepareCommit does not compile.
func (s vaultSink) CreateWriter(_ context.Context, ic sink.InitContext) (sink.CommittingWriter[int64, txn], error) {
	return &vaultWriter{v: s.v, ic: ic}, nil
}
func (s vaultSink) CreateCommitter(context.Context, sink.InitContext) (sink.Committer[txn], error) {
	return s, nil
}
func (s vaultSink) CommittableSerializer() serde.Versioned[txn] { return serde.JSON[txn](1) }

func (s vaultSink) Commit(_ context.Context, reqs []sink.CommitRequest[txn]) error {
	s.v.mu.Lock()
	defer s.v.mu.Unlock()
	for _, r := range reqs {
		name := r.Committable().Name
		if _, done := s.v.committed[name]; done {
			r.SignalAlreadyCommitted() // a restarted job commits again: fine
			continue
		}
		s.v.committed[name] = s.v.staged[name]
		delete(s.v.staged, name)
	}
	return nil
}
func (s vaultSink) Close() error { return nil }

type vaultWriter struct {
	v   *vault
	ic  sink.InitContext
	buf []int64
}

func (w *vaultWriter) Write(_ context.Context, v int64, _ sink.Meta) error {
	w.buf = append(w.buf, v)
	return nil
}
func (w *vaultWriter) Flush(context.Context, bool) error { return nil }
func (w *vaultWriter) Close() error                      { return nil }

// PrepareCommit stages the buffer under a name derived from the subtask and
// the checkpoint, so that recovery could find it.
func (w *vaultWriter) PrepareCommit(_ context.Context, checkpointID int64) ([]txn, error) {
	name := fmt.Sprintf("%s-%d-%d", w.ic.OperatorUID(), w.ic.SubtaskIndex(), checkpointID)
	w.v.mu.Lock()
	w.v.staged[name] = w.buf
	w.v.mu.Unlock()
	w.buf = nil
	return []txn{{name}}, nil
}

func ExampleNewTwoPhase() {
	v := &vault{staged: map[string][]int64{}, committed: map[string][]int64{}}
	env := stream.New(stream.Parallelism(2), stream.Logger(stream.DiscardLogger()))
	src := datagen.New(func(i int64) int64 { return i }, datagen.Count(100), datagen.Splits(2))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[int64](), "numbers"),
		sink.NewTwoPhase[int64, txn](vaultSink{v}), "vault")
	if _, err := env.Execute(context.Background(), "vault"); err != nil {
		fmt.Println(err)
		return
	}
	var all []int64
	for _, vs := range v.committed {
		all = append(all, vs...)
	}
	slices.Sort(all)
	fmt.Println(len(all), all[0], all[99], len(v.staged))
	// Output: 100 0 99 0
}
