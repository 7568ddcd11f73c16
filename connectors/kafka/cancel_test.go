package kafka

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/internal/sinkerase"
	"github.com/sluice-io/sluice/internal/sinkrt"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source/ratelimit"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// watchSink wraps a sink at the runtime's erased level: it reports when
// its first writer start begins, and which subtasks have a Flush in
// flight, with each Flush's result.
type watchSink[T any] struct {
	sinkerase.Sink[T]
	starting chan struct{} // closed when the first NewWriter begins
	start    sync.Once

	mu       sync.Mutex
	inFlight map[int]int        // subtask -> its Flush calls not yet returned
	results  map[int]chan error // subtask -> results of its Flush calls, in order
}

func newWatchSink[T any](s sink.Sink[T]) *watchSink[T] {
	return &watchSink[T]{Sink: sinkerase.Erase(s), starting: make(chan struct{}),
		inFlight: map[int]int{}, results: map[int]chan error{}}
}

// flushing reports whether subtask has a Flush in flight, and the channel
// that Flush's result (and those of its later Flush calls) will go to.
func (s *watchSink[T]) flushing(subtask int) (bool, <-chan error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight[subtask] > 0, s.results[subtask]
}

func (s *watchSink[T]) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[T], error) {
	w, _, err := s.NewWriter(ctx, ic, nil)
	return w, err
}

func (s *watchSink[T]) NewWriter(ctx context.Context, ic sink.InitContext, restored [][]byte) (sink.Writer[T], sinkrt.Writer, error) {
	s.start.Do(func() { close(s.starting) })
	front, w, err := s.Sink.NewWriter(ctx, ic, restored)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	if s.results[ic.SubtaskIndex()] == nil {
		s.results[ic.SubtaskIndex()] = make(chan error, 1024)
	}
	s.mu.Unlock()
	ww := &watchWriter[T]{Writer: w, front: front, s: s, subtask: ic.SubtaskIndex()}
	return ww, ww, nil
}

type watchWriter[T any] struct {
	sinkrt.Writer
	front   sink.Writer[T]
	s       *watchSink[T]
	subtask int
}

func (w *watchWriter[T]) Write(ctx context.Context, v T, m sink.Meta) error {
	return w.front.Write(ctx, v, m)
}

func (w *watchWriter[T]) Flush(ctx context.Context, endOfInput bool) error {
	w.s.mu.Lock()
	w.s.inFlight[w.subtask]++
	results := w.s.results[w.subtask]
	w.s.mu.Unlock()
	err := w.Writer.Flush(ctx, endOfInput)
	w.s.mu.Lock()
	w.s.inFlight[w.subtask]--
	w.s.mu.Unlock()
	select {
	case results <- err:
	default: // nobody reads this many results; the test has failed already
	}
	return err
}

// TestCancelDuringBlockedFlush: the broker stops answering produce
// requests while an exactly-once job runs with a flush timeout of an
// hour; a checkpoint's Flush blocks on the unacknowledged records. Cancelling
// the job makes that Flush return with the cancellation and the job end
// (before the fix the flush ran under context.Background() and FlushTimeout
// and the job waited for it). The broker then answers again and the job,
// restored from its last completed checkpoint, writes every record exactly
// once.
//
// The cancel waits for a Flush that is blocked for certain: one in flight
// on a subtask whose producer has a produce request the broker swallowed.
// Writes and Flush calls of a subtask do not overlap, so that request's
// records were written before the Flush began, and the Flush waits for
// them for an hour. (Before, the test cancelled during the first Flush
// that followed a Write after the broker stopped answering; under load a
// Flush that began before then blocked instead, and none followed it.)
func TestCancelDuringBlockedFlush(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	prefix := uniqueName("cancel")
	var (
		swallow atomic.Bool
		mu      sync.Mutex
		blocked = map[int]bool{} // subtasks with a swallowed produce request
	)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !swallow.Load() {
			return nil, nil, false
		}
		// Handled without a response: the produce request is never
		// answered (the client times it out and retries, forever).
		if pr, ok := req.(*kmsg.ProduceRequest); ok && pr.TransactionID != nil {
			if s, _, ok := parseTxnID(prefix, *pr.TransactionID); ok {
				mu.Lock()
				blocked[s] = true
				mu.Unlock()
			}
		}
		return nil, nil, true
	})
	brokers := c.ListenAddrs()
	const count = 3000
	topic := createTopic(t, brokers, 2)
	store := checkpoint.NewMemory()
	run := func(ctx context.Context, wrap func(sink.Sink[int64]) sink.Sink[int64], restore *checkpoint.Snapshot) error {
		gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(count), datagen.Splits(2), datagen.RatePerSecond(count))
		sk, err := NewSink(brokers, indexSerializer(gen), DefaultTopic(topic), DeliveryGuarantee(ExactlyOnce),
			TransactionalIDPrefix(prefix), TransactionTimeout(time.Minute), FlushTimeout(time.Hour),
			SinkConnectTimeout(time.Hour), SinkLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		opts := []stream.Option{stream.Parallelism(2), stream.CheckpointEvery(50 * time.Millisecond),
			stream.CheckpointStorage(store), stream.Restart(restart.None()), stream.Logger(stream.DiscardLogger())}
		if restore != nil {
			opts = append(opts, stream.RestoreFrom(restore))
		}
		env := stream.New(opts...)
		paced := ratelimit.Wrap(gen, ratelimit.PerCompletedCheckpoint(100))
		stream.SinkTo(stream.FromSource(env, paced, watermark.None[int64](), "gen"), wrap(sk), "kafka")
		_, err = env.Execute(ctx, "cancel-flush")
		return err
	}

	wsc := make(chan *watchSink[int64], 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, func(s sink.Sink[int64]) sink.Sink[int64] { ws := newWatchSink(s); wsc <- ws; return ws }, nil)
	}()
	ws := <-wsc
	// Wait (bounded) for a completed checkpoint, then stop answering.
	deadline := time.Now().Add(time.Minute)
	for {
		if _, _, err := store.Latest(t.Context()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint completed within a minute")
		}
		select {
		case err := <-done:
			t.Fatalf("the job ended before its first checkpoint: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	swallow.Store(true)
	// Wait (bounded) for a blocked Flush: the source is paced by completed
	// checkpoints, none completes from now on, so the job writes at most
	// another 100 records and a checkpoint's Flush waits for them.
	// blockedFlush returns the results channel of a subtask with a
	// swallowed produce request and a Flush in flight (nil if none), its
	// earlier Flush calls' results dropped: the blocked one's comes next.
	blockedFlush := func() <-chan error {
		mu.Lock()
		defer mu.Unlock()
		for s := range blocked {
			if in, r := ws.flushing(s); in {
				for len(r) > 0 {
					<-r
				}
				return r
			}
		}
		return nil
	}
	var results <-chan error
	deadline = time.Now().Add(time.Minute)
	for results = blockedFlush(); results == nil; results = blockedFlush() {
		if time.Now().After(deadline) {
			t.Fatal("no Flush blocked on a swallowed produce request within a minute")
		}
		select {
		case err := <-done:
			t.Fatalf("the job ended before a flush blocked: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	awaitCancelled(t, done, "its blocked flush")
	if err := <-results; !errors.Is(err, context.Canceled) {
		t.Fatalf("the blocked flush returned %v, want the cancellation", err)
	}
	swallow.Store(false)
	snap, info, err := store.Latest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cancelled during a blocked flush; restoring checkpoint %d", info.ID)
	rctx, rcancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer rcancel()
	if err := run(rctx, func(s sink.Sink[int64]) sink.Sink[int64] { return s }, snap); err != nil {
		t.Fatalf("restored run: %v", err)
	}
	checkIndexes(t, readCommitted(t, brokers, topic, count, 3*time.Second), count)
	checkNoOpenTransactions(t, brokers, prefix)
}

// TestCancelDuringWriterStart: an exactly-once writer starting against
// brokers that cannot be reached, with setup and connect timeouts of an
// hour, is stopped by cancelling the job (before the fix its start ran
// under context.Background() and SetupTimeout).
func TestCancelDuringWriterStart(t *testing.T) {
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(10))
	sk, err := NewSink([]string{"127.0.0.1:1"}, indexSerializer(gen), DefaultTopic("x"), DeliveryGuarantee(ExactlyOnce),
		TransactionalIDPrefix("p"), SetupTimeout(time.Hour), SinkConnectTimeout(time.Hour), SinkLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	ws := newWatchSink(sk)
	env := stream.New(stream.Parallelism(1), stream.Restart(restart.None()), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "gen"), sink.Sink[int64](ws), "kafka")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := env.Execute(ctx, "cancel-start")
		done <- err
	}()
	select {
	case <-ws.starting:
	case err := <-done:
		t.Fatalf("the job ended before its writer started: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the writer did not start within a minute")
	}
	cancel()
	awaitCancelled(t, done, "the writer start")
}

// awaitCancelled waits (a minute at most) for a cancelled job to return
// context.Canceled; what names the call that would ignore the job's context.
func awaitCancelled(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled job: %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the cancelled job did not return within a minute: %s ignores the job's context", what)
	}
}
