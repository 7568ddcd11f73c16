package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// noticeLog is one ordered log of what the source reader was told and what
// the sink's committer did, with the gate that holds the first commit back.
type noticeLog struct {
	mu      sync.Mutex
	events  []string
	first   int64         // checkpoint of the first commit, once it began
	later   chan struct{} // closed when a checkpoint after first completed
	laterOK bool
	done    chan struct{} // closed when a committed notice for first came
	doneOK  bool
}

func (l *noticeLog) add(kind string, id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf("%s %d", kind, id))
	switch {
	case kind == "complete" && l.first > 0 && id > l.first+1 && !l.laterOK:
		l.laterOK = true
		close(l.later)
	case kind == "committed" && l.first > 0 && id >= l.first && !l.doneOK:
		l.doneOK = true
		close(l.done)
	}
}

// noticeSource is datagen whose readers record the checkpoint notices.
type noticeSource struct {
	*datagen.Source[int64]
	log *noticeLog
}

func (s *noticeSource) CreateReader(ctx source.ReaderContext) (source.Reader[int64, datagen.Split], error) {
	r, err := s.Source.CreateReader(ctx)
	if err != nil {
		return nil, err
	}
	return &noticeReader{Reader: r, log: s.log}, nil
}

type noticeReader struct {
	source.Reader[int64, datagen.Split]
	log *noticeLog
}

func (r *noticeReader) NotifyCheckpointComplete(id int64) error {
	r.log.add("complete", id)
	if l, ok := r.Reader.(source.CheckpointListener); ok {
		return l.NotifyCheckpointComplete(id)
	}
	return nil
}

func (r *noticeReader) NotifyCheckpointCommitted(id int64) error {
	r.log.add("committed", id)
	return nil
}

// heldSink commits one committable (its checkpoint id) per checkpoint with
// data; the first commit is held until a later checkpoint completed.
type heldSink struct{ log *noticeLog }

type heldWriter struct{ n int }

func (s *heldSink) CreateWriter(context.Context, sink.InitContext) (sink.CommittingWriter[int64, int64], error) {
	return &heldWriter{}, nil
}
func (s *heldSink) CreateCommitter(context.Context, sink.InitContext) (sink.Committer[int64], error) {
	return s, nil
}
func (s *heldSink) CommittableSerializer() serde.Versioned[int64] { return serde.JSON[int64](1) }
func (s *heldSink) Close() error                                  { return nil }

func (s *heldSink) Commit(ctx context.Context, reqs []sink.CommitRequest[int64]) error {
	l := s.log
	for _, r := range reqs {
		id := r.Committable()
		l.add("commit-begin", id)
		l.mu.Lock()
		hold := l.first == 0
		if hold {
			l.first = id
		}
		l.mu.Unlock()
		if hold {
			select {
			case <-l.later:
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(30 * time.Second):
				return errors.New("no later checkpoint completed while the first commit was held")
			}
		}
		l.add("commit-end", id)
	}
	return nil
}

func (w *heldWriter) Write(context.Context, int64, sink.Meta) error { w.n++; return nil }
func (w *heldWriter) Flush(context.Context, bool) error             { return nil }
func (w *heldWriter) Close() error                                  { return nil }
func (w *heldWriter) PrepareCommit(_ context.Context, id int64) ([]int64, error) {
	if w.n == 0 {
		return nil, nil
	}
	w.n = 0
	return []int64{id}, nil
}

// TestCommittedNoticeAfterSinkCommit: a source reader's committed notice
// (source.CommitListener) for checkpoint K comes only after the sink's
// commit of K (and of every checkpoint before it) returned, though later
// checkpoints complete meanwhile; and it does come once the commit returns.
func TestCommittedNoticeAfterSinkCommit(t *testing.T) {
	l := &noticeLog{later: make(chan struct{}), done: make(chan struct{})}
	env := stream.New(stream.Parallelism(1), stream.CheckpointEvery(20*time.Millisecond),
		stream.Logger(engine.DiscardLogger()))
	src := &noticeSource{Source: datagen.New(func(i int64) int64 { return i }, datagen.RatePerSecond(2000)), log: l}
	s := stream.FromSource(env, src, watermark.None[int64](), "gen")
	stream.SinkTo(s, sink.NewTwoPhase[int64, int64](&heldSink{log: l}), "held")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := env.Execute(ctx, "notices")
		errc <- err
	}()
	select {
	case <-l.done:
	case err := <-errc:
		t.Fatalf("job ended before the committed notice: %v", err)
	case <-ctx.Done():
		cancel()
		<-errc
		t.Fatal("no committed notice for the held checkpoint within a minute")
	}
	cancel()
	if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	began := map[int64]bool{}
	ended := map[int64]bool{}
	completed := map[int64]bool{}
	for i, e := range l.events {
		var kind string
		var id int64
		if _, err := fmt.Sscanf(e, "%s %d", &kind, &id); err != nil {
			t.Fatal(err)
		}
		switch kind {
		case "commit-begin":
			began[id] = true
		case "commit-end":
			ended[id] = true
		case "complete":
			completed[id] = true
		case "committed":
			if !completed[id] {
				t.Fatalf("event %d: committed notice for %d before its complete notice: %v", i, id, l.events[:i+1])
			}
			for b := range began {
				if b <= id && !ended[b] {
					t.Fatalf("event %d: committed notice for %d while the commit of %d had not returned: %v", i, id, b, l.events[:i+1])
				}
			}
		}
	}
	if !ended[l.first] {
		t.Fatalf("held commit of %d never returned: %v", l.first, l.events)
	}
}
