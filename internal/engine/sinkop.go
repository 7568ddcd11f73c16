package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sluice-io/sluice/internal/sinkerase"
	"github.com/sluice-io/sluice/internal/sinkrt"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/watermark"
)

// State part names of a sink subtask.
const (
	partWriter       = "writer"
	partCommittables = "committables"
	partSplits       = "splits"
)

type sinkFactory interface {
	describe() string
	newTail(env *taskEnv, writerState, committables [][]byte) (Collector any, op *sinkTailOp, err error)
	newGlobal(ctx context.Context, ic sink.InitContext) (sinkrt.GlobalCommitter, error)
}

// SinkNode adds a sink. Two-phase sinks must have been built with
// sink.NewTwoPhase (or NewStatefulTwoPhase) so the runtime can commit them.
func SinkNode[T any](g *Graph, name string, s sink.Sink[T]) *Node {
	return g.add(&Node{name: name, kind: kindSink, sink: &sinkFact[T]{s: sinkerase.Erase(s)}})
}

type sinkFact[T any] struct{ s sinkerase.Sink[T] }

func (f *sinkFact[T]) describe() string { return f.s.Describe() }

func (f *sinkFact[T]) newGlobal(ctx context.Context, ic sink.InitContext) (sinkrt.GlobalCommitter, error) {
	return f.s.NewGlobalCommitter(ctx, ic)
}

func (f *sinkFact[T]) newTail(env *taskEnv, writerState, committables [][]byte) (any, *sinkTailOp, error) {
	ictx := env.initContext(env.v.tail())
	// The writer's and committer's constructors, like every writer call,
	// get the task's context: cancelling the job cancels a writer that is
	// blocked starting (a lease, a broker that does not answer).
	front, w, err := f.s.NewWriter(env.ctx, ictx, writerState)
	if err != nil {
		return nil, nil, fmt.Errorf("create writer: %w", err)
	}
	c, err := f.s.NewCommitter(env.ctx, ictx)
	if err != nil {
		_ = w.Close()
		return nil, nil, fmt.Errorf("create committer: %w", err)
	}
	op := &sinkTailOp{env: env, writer: w, committer: c, send: ictx.Metrics().Counter(metrics.NumRecordsSend)}
	if err := op.restore(committables); err != nil {
		_ = w.Close()
		if c != nil {
			_ = c.Close()
		}
		return nil, nil, err
	}
	sw := &sinkWriter[T]{w: front, op: op, meta: sink.Meta{Watermark: watermark.Min}}
	op.typed = sw
	return Collector[T](sw), op, nil
}

// sinkWriter is the typed front of a sink tail.
type sinkWriter[T any] struct {
	w    sink.Writer[T]
	op   *sinkTailOp
	meta sink.Meta
	n    int64
}

func (s *sinkWriter[T]) Collect(recs []elem[T]) {
	s.n += int64(len(recs))
	w, m, ctx := s.w, s.meta, s.op.env.ctx
	for i := range recs {
		m.Timestamp, m.HasTimestamp = recs[i].ts, recs[i].ts != watermark.NoTimestamp
		if err := w.Write(ctx, recs[i].v, m); err != nil {
			s.op.env.fail(fmt.Errorf("write: %w", err))
			return
		}
	}
}

func (s *sinkWriter[T]) flushCount() {
	if s.n > 0 {
		s.op.send.Add(s.n)
		s.n = 0
	}
}

// pendingCommittable is a committable waiting for its checkpoint (or a
// later one) to complete and its commit to succeed.
type pendingCommittable struct {
	checkpoint int64
	data       []byte
	inFlight   bool
}

// sinkTailOp is the erased, per-subtask sink operator: it drives the writer
// through checkpoints and feeds the committer goroutine.
type sinkTailOp struct {
	env       *taskEnv
	typed     interface{ flushCount() }
	writer    sinkrt.Writer
	committer sinkrt.Committer
	send      *metrics.Counter
	ended     bool
	notified  int64 // highest checkpoint notified complete
	pending   []pendingCommittable

	cq      *queue[commitJob]
	wg      sync.WaitGroup
	stop    context.CancelFunc
	started bool
}

type commitJob struct {
	upTo  int64
	items []pendingCommittable
}

// commitResult is mailed back to the task by the committer goroutine.
type commitResult struct {
	upTo      int64
	committed []pendingCommittable // committables that are now committed
	failed    error                // unknown-reason failure: the job fails
}

func (op *sinkTailOp) restore(blobs [][]byte) error {
	ps, err := decodeCommittables(blobs)
	if err != nil {
		return err
	}
	op.pending = append(op.pending, ps...)
	return nil
}

// encodeCommittable stores a committable with its checkpoint id in front.
func encodeCommittable(p pendingCommittable) []byte {
	b := make([]byte, 8+len(p.data))
	binary.BigEndian.PutUint64(b, uint64(p.checkpoint))
	copy(b[8:], p.data)
	return b
}

// decodeCommittables reverses encodeCommittable, sorted by checkpoint.
func decodeCommittables(blobs [][]byte) ([]pendingCommittable, error) {
	out := make([]pendingCommittable, 0, len(blobs))
	for i, b := range blobs {
		if len(b) < 8 {
			return nil, fmt.Errorf("restore committable %d: %d bytes, want at least 8", i, len(b))
		}
		out = append(out, pendingCommittable{checkpoint: int64(binary.BigEndian.Uint64(b)), data: b[8:]})
	}
	slices.SortStableFunc(out, func(a, b pendingCommittable) int { return cmpInt64(a.checkpoint, b.checkpoint) })
	return out, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (op *sinkTailOp) open(ctx context.Context) {
	if op.committer == nil {
		return
	}
	cctx, cancel := context.WithCancel(ctx)
	op.stop = cancel
	op.cq = newQueue[commitJob]()
	op.started = true
	op.wg.Add(1)
	go func() {
		defer op.wg.Done()
		op.commitLoop(cctx)
	}()
	// Committables restored from a completed checkpoint are committed again
	// right away; committing what is already committed is a success.
	// They are reported as committed up to the restored checkpoint, which
	// the global committer (if any) waits for.
	// The restored checkpoint completed: its commit reports count up to it
	// (a region restored from a bounded job's final checkpoint gets no
	// later completion notice).
	op.notified = op.env.restoredID
	if len(op.pending) > 0 {
		op.submit(max(op.env.restoredID, op.pending[len(op.pending)-1].checkpoint))
	}
}

// committedUpTo is how far a sink subtask restored from checkpoint
// restoredID counts as committed before it runs: up to restoredID, or one
// less while it still re-commits restored committables (it reports when
// done).
func (op *sinkTailOp) committedUpTo(restoredID int64) int64 {
	if op.committer != nil && len(op.pending) > 0 {
		return restoredID - 1
	}
	return restoredID
}

func (op *sinkTailOp) watermark(wm int64) error {
	if sw, ok := op.typed.(interface{ setWatermark(int64) }); ok {
		sw.setWatermark(wm)
	}
	return op.writer.WriteWatermark(op.env.ctx, wm)
}

func (s *sinkWriter[T]) setWatermark(wm int64) { s.meta.Watermark = wm }

func (op *sinkTailOp) endInput() error {
	op.typed.flushCount()
	op.ended = true
	if err := op.writer.Flush(op.env.ctx, true); err != nil {
		return fmt.Errorf("flush at end of input: %w", err)
	}
	return nil
}

// barrier prepares the writer for checkpoint id and returns the sink's part
// of the subtask state.
func (op *sinkTailOp) barrier(id int64, parts map[string][][]byte) error {
	op.typed.flushCount()
	if !op.ended {
		if err := op.writer.Flush(op.env.ctx, false); err != nil {
			return fmt.Errorf("flush at checkpoint %d: %w", id, err)
		}
	}
	cs, err := op.writer.PrepareCommitRaw(op.env.ctx, id)
	if err != nil {
		return fmt.Errorf("prepare commit at checkpoint %d: %w", id, err)
	}
	if op.committer == nil && len(cs) > 0 {
		return fmt.Errorf("writer returned %d committables but the sink has no committer", len(cs))
	}
	for _, c := range cs {
		op.pending = append(op.pending, pendingCommittable{checkpoint: id, data: c})
	}
	st, err := op.writer.SnapshotRaw(op.env.ctx, id)
	if err != nil {
		return fmt.Errorf("snapshot writer at checkpoint %d: %w", id, err)
	}
	if st != nil {
		parts[partWriter] = st
	}
	if len(op.pending) > 0 {
		blobs := make([][]byte, len(op.pending))
		for i, p := range op.pending {
			blobs[i] = encodeCommittable(p)
		}
		parts[partCommittables] = blobs
	}
	return nil
}

// notifyComplete hands every committable of checkpoints up to id to the
// committer goroutine. It reports true when there is nothing to commit.
func (op *sinkTailOp) notifyComplete(id int64) bool {
	if op.committer == nil {
		return true
	}
	return op.submit(id)
}

func (op *sinkTailOp) submit(upTo int64) bool {
	var items []pendingCommittable
	for i := range op.pending {
		p := &op.pending[i]
		if p.checkpoint <= upTo && !p.inFlight {
			p.inFlight = true
			items = append(items, *p)
		}
	}
	if len(items) == 0 {
		return !op.anyInFlight()
	}
	op.cq.Put(commitJob{upTo: upTo, items: items})
	return false
}

func (op *sinkTailOp) anyInFlight() bool {
	for _, p := range op.pending {
		if p.inFlight {
			return true
		}
	}
	return false
}

// committed removes settled committables after a commit result.
func (op *sinkTailOp) committed(r commitResult) {
	op.pending = slices.DeleteFunc(op.pending, func(p pendingCommittable) bool {
		return p.inFlight && p.checkpoint <= r.upTo
	})
}

func (op *sinkTailOp) notifyAborted(id int64) error {
	return op.writer.NotifyCheckpointAborted(op.env.ctx, id)
}

func (op *sinkTailOp) close() error {
	var errs []error
	if op.started {
		op.stop()
		op.wg.Wait()
	}
	log := op.env.log()
	if op.committer != nil {
		errs = append(errs, callSafely(log, "Committer.Close", op.committer.Close))
	}
	errs = append(errs, callSafely(log, "Writer.Close", op.writer.Close))
	return errors.Join(errs...)
}

// Commit retry policy.
const (
	commitMaxRetries   = 10
	commitInitialDelay = 50 * time.Millisecond
	commitMaxDelay     = 5 * time.Second
)

func (op *sinkTailOp) commitLoop(ctx context.Context) {
	var buf []commitJob
	for {
		select {
		case <-ctx.Done():
			return
		case <-op.cq.Ready():
		}
		for _, job := range op.cq.Drain(buf) {
			res := op.commitJob(ctx, job)
			if ctx.Err() != nil {
				return
			}
			op.env.post(mail{kind: mailCommitResult, payload: res})
		}
	}
}

// commitJob commits the items checkpoint by checkpoint, in order, retrying
// requests that ask for it. A panic in the committer fails the task with
// an error wrapping ErrPanic (and goes through the restart strategy), as a
// panic on the task goroutine does.
func (op *sinkTailOp) commitJob(ctx context.Context, job commitJob) (res commitResult) {
	res = commitResult{upTo: job.upTo}
	log := op.env.log()
	defer recoverTo(&res.failed, log, "Committer.Commit")
	fails := op.env.metrics.Counter(metrics.NumCommittablesFailure)
	for start := 0; start < len(job.items); {
		end := start
		for end < len(job.items) && job.items[end].checkpoint == job.items[start].checkpoint {
			end++
		}
		reqs := make([]*sinkrt.Request, 0, end-start)
		for _, it := range job.items[start:end] {
			reqs = append(reqs, &sinkrt.Request{CheckpointID: it.checkpoint, Data: it.data})
		}
		delay := commitInitialDelay
		for len(reqs) > 0 {
			if err := op.committer.Commit(ctx, reqs); err != nil {
				res.failed = fmt.Errorf("commit checkpoint %d: %w", reqs[0].CheckpointID, err)
				return res
			}
			var retry []*sinkrt.Request
			for _, r := range reqs {
				switch r.Outcome {
				case sinkrt.Committed, sinkrt.AlreadyCommitted:
					res.committed = append(res.committed, pendingCommittable{checkpoint: r.CheckpointID, data: r.Data})
					op.env.metrics.Counter(metrics.NumCommittablesSuccess).Inc()
				case sinkrt.FailedKnown:
					fails.Inc()
					log.Error("committable failed with a known reason; its data is lost",
						"checkpoint", r.CheckpointID, "error", r.Err)
				case sinkrt.FailedUnknown:
					res.failed = fmt.Errorf("%w: checkpoint %d: %w", sink.ErrCommitFailed, r.CheckpointID, r.Err)
					return res
				case sinkrt.Retry:
					r.Retries++
					op.env.metrics.Counter(metrics.NumCommittablesRetry).Inc()
					if r.Retries > commitMaxRetries {
						res.failed = fmt.Errorf("%w: checkpoint %d: still asking to retry after %d retries", sink.ErrCommitFailed, r.CheckpointID, commitMaxRetries)
						return res
					}
					retry = append(retry, r)
				}
			}
			reqs = retry
			if len(reqs) > 0 {
				t := time.NewTimer(delay)
				select {
				case <-ctx.Done():
					t.Stop()
					res.failed = ctx.Err()
					return res
				case <-t.C:
				}
				delay = min(2*delay, commitMaxDelay)
			}
		}
		start = end
	}
	return res
}
