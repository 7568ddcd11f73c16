package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// groupOffset returns the group's committed offset of topic partition 0,
// or -1 when it has none.
func groupOffset(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string) int64 {
	t.Helper()
	got, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup(topic, 0); ok && o.Err == nil {
		return o.At
	}
	return -1
}

// TestReaderCommitsGroupOffsetsOnCommittedNotice: the reader commits a
// checkpoint's positions to the group on the committed notice
// (source.CommitListener), not when the checkpoint completes; a notice
// covers the skipped checkpoints before it, whose positions it drops.
func TestReaderCommitsGroupOffsetsOnCommittedNotice(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		topic := createTopic(t, b.brokers, 1)
		group := uniqueName("g")
		src, err := NewSource(b.brokers, StringDeserializer(), Topics(topic), GroupID(group), SourceLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		adm := kadm.NewClient(newClient(t, b.brokers))
		newR := func() *reader[string] {
			r, err := src.CreateReader(&fakes.ReaderContext{})
			if err != nil {
				t.Fatal(err)
			}
			return r.(*reader[string])
		}

		// Completed, not committed: nothing reaches the group (Close
		// waits for any commit in flight).
		r := newR()
		r.offsets[1] = []Split{{Topic: topic, Partition: 0, Offset: 5, StopOffset: NoStop}}
		if l, ok := any(r).(source.CheckpointListener); ok {
			if err := l.NotifyCheckpointComplete(1); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if got := groupOffset(t.Context(), t, adm, group, topic); got != -1 {
			t.Fatalf("group offset %d after a completed but uncommitted checkpoint, want none", got)
		}

		// Committed notice for 3 (2's skipped): 3's positions are
		// committed, older ones dropped, later ones kept.
		r = newR()
		l, ok := any(r).(source.CommitListener)
		if !ok {
			t.Fatal("kafka reader does not implement source.CommitListener")
		}
		r.offsets[2] = []Split{{Topic: topic, Partition: 0, Offset: 7, StopOffset: NoStop}}
		r.offsets[3] = []Split{{Topic: topic, Partition: 0, Offset: 9, StopOffset: NoStop}}
		r.offsets[4] = []Split{{Topic: topic, Partition: 0, Offset: 11, StopOffset: NoStop}}
		if err := l.NotifyCheckpointCommitted(3); err != nil {
			t.Fatal(err)
		}
		if _, ok := r.offsets[4]; !ok || len(r.offsets) != 1 {
			t.Fatalf("positions kept after the notice for 3: %v, want only checkpoint 4's", r.offsets)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if got := groupOffset(t.Context(), t, adm, group, topic); got != 9 {
			t.Fatalf("group offset %d after checkpoint 3 committed, want 9", got)
		}
	})
}

// offsetC is a committable of heldOffsetSink: the end (last offset + 1)
// of the records written up to its checkpoint.
type offsetC struct {
	Checkpoint int64
	End        int64
}

// heldOffsetSink holds its first commit until two later checkpoints
// completed, and records the group's offset at that moment: it must not
// be past the end of the output committed so far.
type heldOffsetSink struct {
	reg          *metrics.Registry
	adm          *kadm.Client
	group, topic string

	mu        sync.Mutex
	committed int64 // end of the output committed so far
	held      bool
	heldEnd   int64
	seen      int64 // the group's offset while the commit was held
	heldDone  chan struct{}
}

type heldOffsetWriter struct{ end, last int64 }

func (s *heldOffsetSink) CreateWriter(context.Context, sink.InitContext) (sink.CommittingWriter[int64, offsetC], error) {
	return &heldOffsetWriter{}, nil
}
func (s *heldOffsetSink) CreateCommitter(context.Context, sink.InitContext) (sink.Committer[offsetC], error) {
	return s, nil
}
func (s *heldOffsetSink) CommittableSerializer() serde.Versioned[offsetC] {
	return serde.JSON[offsetC](1)
}
func (s *heldOffsetSink) Close() error { return nil }

func (s *heldOffsetSink) Commit(ctx context.Context, reqs []sink.CommitRequest[offsetC]) error {
	for _, r := range reqs {
		c := r.Committable()
		s.mu.Lock()
		hold := !s.held
		s.held = true
		s.mu.Unlock()
		if hold {
			// Wait (bounded) until checkpoint c+2 completed.
			deadline := time.Now().Add(30 * time.Second)
			for s.reg.Sum(metrics.NumberOfCompletedCheckpoints) < c.Checkpoint+2 {
				if time.Now().After(deadline) {
					return errors.New("no later checkpoint completed while the commit was held")
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(5 * time.Millisecond):
				}
			}
			got, err := s.adm.FetchOffsets(ctx, s.group)
			if errors.Is(err, kerr.GroupIDNotFound) {
				got, err = nil, nil
			}
			if err != nil {
				return fmt.Errorf("fetch group offsets: %w", err)
			}
			seen := int64(-1)
			if o, ok := got.Lookup(s.topic, 0); ok && o.Err == nil {
				seen = o.At
			}
			s.mu.Lock()
			s.seen, s.heldEnd = seen, c.End
			s.mu.Unlock()
		}
		s.mu.Lock()
		s.committed = max(s.committed, c.End)
		s.mu.Unlock()
		if hold {
			close(s.heldDone)
		}
	}
	return nil
}

func (w *heldOffsetWriter) Write(_ context.Context, off int64, _ sink.Meta) error {
	w.end = max(w.end, off+1)
	return nil
}
func (w *heldOffsetWriter) Flush(context.Context, bool) error { return nil }
func (w *heldOffsetWriter) Close() error                      { return nil }
func (w *heldOffsetWriter) PrepareCommit(_ context.Context, id int64) ([]offsetC, error) {
	if w.end == w.last {
		return nil, nil
	}
	w.last = w.end
	return []offsetC{{Checkpoint: id, End: w.end}}, nil
}

// TestGroupOffsetsWaitForSinkCommit runs a Kafka source with a group into
// a sink whose first commit is held until two later checkpoints completed:
// meanwhile the group's offset is not past the output committed so far
// (a re-run from the group's offsets loses nothing), and once the commit
// returns the group's offset reaches the held checkpoint's end.
func TestGroupOffsetsWaitForSinkCommit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		topic := createTopic(t, b.brokers, 1)
		fillTopic(t, b.brokers, topic, 1, 3000, 10)
		group := uniqueName("g")
		offsetOf := DeserializerFunc[int64](func(r *kgo.Record) (int64, error) { return r.Offset, nil })
		src, err := NewSource(b.brokers, offsetOf, Topics(topic), GroupID(group), SourceLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		reg := metrics.NewRegistry()
		adm := kadm.NewClient(newClient(t, b.brokers))
		snk := &heldOffsetSink{reg: reg, adm: adm, group: group, topic: topic, heldDone: make(chan struct{})}
		env := stream.New(stream.Parallelism(1), stream.CheckpointEvery(20*time.Millisecond),
			stream.Logger(stream.DiscardLogger()), stream.Metrics(reg))
		stream.SinkTo(stream.FromSource(env, src, watermark.None[int64](), "kafka"), sink.NewTwoPhase[int64, offsetC](snk), "held")
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			_, err := env.Execute(ctx, "groupcommit")
			errc <- err
		}()
		stop := func() {
			cancel()
			if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
		}
		select {
		case <-snk.heldDone:
		case err := <-errc:
			t.Fatalf("job ended before the held commit returned: %v", err)
		}
		snk.mu.Lock()
		seen, heldEnd := snk.seen, snk.heldEnd
		snk.mu.Unlock()
		if seen > 0 {
			stop()
			t.Fatalf("while the sink's commit (output up to offset %d) was held, the group's offset was %d: the group ran ahead of the committed output", heldEnd, seen)
		}
		// Once the commit returned, the group catches up (bounded wait).
		deadline := time.Now().Add(30 * time.Second)
		for groupOffset(ctx, t, adm, group, topic) < heldEnd {
			if time.Now().After(deadline) {
				stop()
				t.Fatalf("the group's offset never reached %d after the commit returned", heldEnd)
			}
			time.Sleep(5 * time.Millisecond)
		}
		stop()
	})
}
