package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/internal/cluster/exchange"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
)

type mailKind int

const (
	mailAddSplits mailKind = iota
	mailNoMoreSplits
	mailEvent
	mailTrigger
	mailComplete
	mailCommitted // every sink committed checkpoints up to id (sources only)
	mailAbort
	mailCommitResult
	mailShutdown
)

// mail is a control message to a task. Mailboxes are FIFO: a split
// assigned before a checkpoint trigger is added before the snapshot.
type mail struct {
	kind mailKind
	id   int64
	stop bool // mailTrigger: the job is stopping at this barrier
	// payload is the splits ([]S) of mailAddSplits, the source.Event of
	// mailEvent, or the commitResult of mailCommitResult.
	payload any
}

// taskEnv is what operators of a task see of the runtime.
type taskEnv struct {
	att     *attempt
	v       *vertex
	subtask int
	ctx     context.Context
	metrics metrics.Group
	mailbox *queue[mail]
	t       *task
	// gen is the subtask's generation: it grows with each regional
	// restart, and the coordinator ignores messages of older ones.
	gen        int
	attemptNo  int   // what Attempt() reports
	restoredID int64 // the checkpoint this task was restored from, or 0
}

// epoch is the epoch of the task's channels to other hosts: its attempt
// and generation (see exchange.Epoch).
func (e *taskEnv) epoch() exchange.Epoch {
	return exchange.Epoch{Attempt: uint64(e.att.number), Generation: uint64(e.gen)}
}

func (e *taskEnv) fail(err error) {
	if e.t.err == nil {
		e.t.err = err
	}
}

// post enqueues a mail to this task from any goroutine.
func (e *taskEnv) post(m mail) { e.mailbox.Put(m) }

func (e *taskEnv) log() *slog.Logger {
	return e.att.job.log.With("operator", e.v.id, "subtask", e.subtask)
}

func (e *taskEnv) emitWatermark(wm int64) { e.t.emitWatermark(wm) }
func (e *taskEnv) markIdle()              { e.t.markIdle() }

func (e *taskEnv) nodeMetrics(n *Node) metrics.Group {
	return e.att.job.metricRoot.With("operator", n.name).With("subtask", fmt.Sprint(e.subtask))
}

func (e *taskEnv) initContext(n *Node) sink.InitContext {
	return &initContext{env: e, node: n}
}

type initContext struct {
	env  *taskEnv
	node *Node
}

func (c *initContext) SubtaskIndex() int      { return c.env.subtask }
func (c *initContext) Parallelism() int       { return c.env.v.parallelism }
func (c *initContext) Attempt() int           { return c.env.attemptNo }
func (c *initContext) JobName() string        { return c.env.att.job.name }
func (c *initContext) JobID() string          { return c.env.att.job.id }
func (c *initContext) RunID() string          { return c.env.att.job.runID }
func (c *initContext) OperatorName() string   { return c.node.name }
func (c *initContext) OperatorUID() string    { return c.node.UID() }
func (c *initContext) Metrics() metrics.Group { return c.env.nodeMetrics(c.node) }
func (c *initContext) CheckpointInterval() time.Duration {
	return c.env.att.job.cfg.CheckpointInterval
}
func (c *initContext) RestoredCheckpointID() (int64, bool) {
	id := c.env.restoredID
	return id, id > 0
}

type readerContext struct{ env *taskEnv }

func (c *readerContext) SubtaskIndex() int { return c.env.subtask }
func (c *readerContext) JobID() string     { return c.env.att.job.id }
func (c *readerContext) Parallelism() int  { return c.env.v.parallelism }
func (c *readerContext) Attempt() int      { return c.env.attemptNo }
func (c *readerContext) SendSplitRequest() {
	c.env.att.inbox.Put(splitRequestMsg{c.env.self()})
}
func (c *readerContext) SendEventToEnumerator(e source.Event) {
	e, err := c.env.outboundEvent(e)
	if err != nil {
		c.env.fail(err)
		return
	}
	c.env.att.inbox.Put(readerEventMsg{sender: c.env.self(), event: e})
}
func (c *readerContext) Metrics() metrics.Group { return c.env.nodeMetrics(c.env.v.head()) }

// task runs one subtask of a vertex: a head (a source reader or an input
// gate), chained operators, and a tail (a sink or network outputs).
type task struct {
	env      *taskEnv
	src      sourceHead
	gate     inputGate
	sinkOp   *sinkTailOp
	sinkNode *Node
	outs     []outputTail
	err      error
	ended    bool // input ended
	stopped  bool // the job is stopping: the source reads no more
	shutdown bool
	srcReady bool
	mails    []mail
	outCount *metrics.Counter
	inCount  *metrics.Counter
	lastOut  int64
	lastIn   int64
	// remote is set on the coordinator's stand-in for a subtask placed on
	// another task host: mails go there (remote.go). remoteUpTo is how far
	// its sink counts as committed, as the host reported.
	remote     *remoteSession
	remoteUpTo int64
}

// build instantiates the chain of v for one subtask, tail first. It runs
// connector code (CreateReader, CreateWriter, …) on the coordinator
// goroutine: a panic there fails the job naming this subtask.
func (t *task) build(channels map[*edge]any, restored map[string]*checkpoint.TaskState, rt *routes) (err error) {
	defer recoverTo(&err, t.env.log(), "")
	env, v := t.env, t.env.v
	// Tail: network outputs or a sink.
	var next any
	tail := v.tail()
	switch {
	case tail.kind == kindSink:
		var ws, cs [][]byte
		if st := restored[tail.UID()]; st != nil {
			ws, cs = st.Parts[partWriter], st.Parts[partCommittables]
			if ws == nil {
				ws = [][]byte{}
			}
		}
		c, op, err := tail.sink.newTail(env, ws, cs)
		if err != nil {
			return fmt.Errorf("sink %s: %w", tail.name, err)
		}
		next, t.sinkOp, t.sinkNode = c, op, tail
	default:
		var cs []any
		for _, e := range v.outputs {
			links := rt.links(env.att.job.vertices, e, env.subtask, false)
			c, out := tail.out.newOutput(env.ctx, channels[e], env.subtask, e.part, e.hash, env.att.job.cfg.BatchSize, env.fail, links, env.epoch())
			cs = append(cs, c)
			t.outs = append(t.outs, out)
		}
		next = tail.out.fanout(cs)
	}
	// Chained operators, back to front.
	for i := len(v.nodes) - 1; i >= 0; i-- {
		n := v.nodes[i]
		if n.kind != kindOperator {
			continue
		}
		name := n.name
		c, err := n.op(next, func(err error) { env.fail(fmt.Errorf("operator %s: %w", name, err)) })
		if err != nil {
			return fmt.Errorf("operator %s: %w", n.name, err)
		}
		next = c
	}
	head := v.head()
	if head.kind == kindSource {
		var splits [][]byte
		if st := restored[head.UID()]; st != nil {
			splits = st.Parts[partSplits]
		}
		h, err := head.src.newHead(env, next, splits)
		if err != nil {
			return fmt.Errorf("source %s: %w", head.name, err)
		}
		t.src, t.srcReady = h, true
		return nil
	}
	{
		e := v.inputs[0]
		g, setNext, err := e.from.out.newGate(channels[e], env.subtask, rt.links(env.att.job.vertices, e, env.subtask, true), env.epoch())
		if err != nil {
			return err
		}
		if err := setNext(next); err != nil {
			g.close()
			return err
		}
		t.gate = g
	}
	return nil
}

// run is the mailbox loop. It returns nil when shut down, or the error that
// failed the task.
func (t *task) run() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(t.env.log(), "", r)
		}
		if t.env.att.finishing.Load() && errors.Is(err, context.Canceled) {
			err = nil // the job is done; the cancel only released this task
		}
		if cerr := t.close(); cerr != nil && err == nil {
			err = cerr
		}
		if err != nil {
			err = &TaskError{Operator: t.env.v.describe(), Subtask: t.env.subtask, Err: err}
		}
	}()
	ctx := t.env.ctx
	if t.src != nil {
		if err := t.src.start(ctx); err != nil {
			return err
		}
	}
	if t.sinkOp != nil {
		t.sinkOp.open(ctx)
	}
	for _, o := range t.outs {
		if err := o.open(ctx); err != nil {
			return err
		}
	}
	tm := t.newTimers()
	defer tm.stop()
	for {
		if err := t.serveMail(); err != nil || t.shutdown {
			return err
		}
		progressed, err := t.poll()
		if err != nil {
			return err
		}
		if progressed {
			// A reader that always has more must not keep a cancelled
			// task alive; timers fire between polls.
			if err := t.between(ctx, tm); err != nil {
				return err
			}
			continue
		}
		if err := t.wait(ctx, tm); err != nil {
			return err
		}
	}
}

// taskTimers are the periodic flush of partial batches (tasks with
// network outputs) and the periodic watermark (sources).
type taskTimers struct {
	flushC, wmC <-chan time.Time
	tickers     []*time.Ticker
}

func (t *task) newTimers() *taskTimers {
	cfg := &t.env.att.job.cfg
	tm := &taskTimers{}
	if len(t.outs) > 0 && cfg.BufferTimeout > 0 {
		tk := time.NewTicker(cfg.BufferTimeout)
		tm.tickers = append(tm.tickers, tk)
		tm.flushC = tk.C
	}
	if t.src != nil && cfg.WatermarkInterval > 0 {
		tk := time.NewTicker(cfg.WatermarkInterval)
		tm.tickers = append(tm.tickers, tk)
		tm.wmC = tk.C
	}
	return tm
}

func (tm *taskTimers) stop() {
	for _, tk := range tm.tickers {
		tk.Stop()
	}
}

// serveMail handles every queued mail. It returns the error that fails
// the task (a mail's, or one an operator reported).
func (t *task) serveMail() error {
	if t.env.mailbox.Len() > 0 {
		t.mails = t.env.mailbox.Drain(t.mails)
		for _, m := range t.mails {
			if err := t.handleMail(m); err != nil {
				return err
			}
		}
		clear(t.mails)
	}
	return t.err
}

// poll polls the head once: the source reader, or the input gate. It
// reports whether that made progress.
func (t *task) poll() (progressed bool, err error) {
	switch {
	case t.src != nil && !t.ended && !t.stopped && t.srcReady:
		st, err := t.src.poll()
		t.src.flushCount()
		if err != nil {
			return false, err
		}
		switch st {
		case source.NothingAvailable:
			t.srcReady = false
		case source.EndOfInput:
			if err := t.endOfInput(); err != nil {
				return false, err
			}
		}
		progressed = true
	case t.gate != nil:
		progressed, err = t.gate.poll(t)
		if err != nil {
			return false, err
		}
	}
	return progressed, t.err
}

// between serves what is due after a poll that made progress, without
// waiting.
func (t *task) between(ctx context.Context, tm *taskTimers) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.flushC:
		t.flush()
	case <-tm.wmC:
		t.src.periodicWatermark()
	default:
	}
	return nil
}

// wait waits for a mail, input, a timer or the cancel. It first sends
// the partial batches of the task's network outputs: with nothing to do
// the task does not hold records back until the buffer timeout.
func (t *task) wait(ctx context.Context, tm *taskTimers) error {
	if len(t.outs) > 0 {
		t.flush()
	}
	var avail <-chan struct{}
	switch {
	case t.src != nil && !t.ended && !t.stopped && !t.srcReady:
		avail = t.src.available()
	case t.gate != nil:
		avail = t.gate.ready()
	}
	select {
	case <-t.env.mailbox.Ready():
	case <-avail:
		t.srcReady = true
	case <-tm.flushC:
		t.flush()
	case <-tm.wmC:
		t.src.periodicWatermark()
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (t *task) flush() {
	for _, o := range t.outs {
		o.flush()
	}
	t.countOut()
}

func (t *task) countOut() {
	var n int64
	for _, o := range t.outs {
		n += o.recordsOut()
	}
	if n > t.lastOut {
		t.outCount.Add(n - t.lastOut)
		t.lastOut = n
	}
	if t.gate != nil {
		if in := t.gate.recordsIn(); in > t.lastIn {
			t.inCount.Add(in - t.lastIn)
			t.lastIn = in
		}
	}
}

func (t *task) handleMail(m mail) error {
	switch m.kind {
	case mailAddSplits:
		// New splits may let the reader make progress: poll it again
		// rather than rely on it signalling Available.
		t.srcReady = true
		return t.src.addSplits(m.payload)
	case mailNoMoreSplits:
		t.src.noMoreSplits()
		t.srcReady = true
	case mailEvent:
		if err := t.src.handleEvent(m.payload); err != nil {
			return fmt.Errorf("handle source event: %w", err)
		}
		t.srcReady = true
	case mailTrigger:
		if err := t.checkpoint(m.id); err != nil {
			return err
		}
		if m.stop {
			// Stopping: read nothing after the final barrier; the job ends
			// once that checkpoint is committed.
			t.stopped = true
		}
	case mailComplete:
		if t.src != nil {
			if err := t.src.notifyComplete(m.id); err != nil {
				return fmt.Errorf("notify checkpoint %d complete: %w", m.id, err)
			}
			t.srcReady = true // the notice may have unblocked the reader
		}
		if t.sinkOp != nil {
			t.sinkOp.notified = max(t.sinkOp.notified, m.id)
			if t.sinkOp.notifyComplete(m.id) {
				t.reportCommitted(t.sinkOp.notified, nil)
			}
		}
	case mailCommitted:
		if t.src != nil {
			if err := t.src.notifyCommitted(m.id); err != nil {
				return fmt.Errorf("notify checkpoint %d committed: %w", m.id, err)
			}
		}
	case mailAbort:
		if t.stopped {
			// The stop's final checkpoint was aborted (a failed stop with
			// savepoint): the job runs on.
			t.stopped, t.srcReady = false, true
		}
		if t.gate != nil {
			t.gate.abort(m.id)
		}
		if t.src != nil {
			if err := t.src.notifyAborted(m.id); err != nil {
				return fmt.Errorf("notify checkpoint %d aborted: %w", m.id, err)
			}
		}
		if t.sinkOp != nil {
			if err := t.sinkOp.notifyAborted(m.id); err != nil {
				return fmt.Errorf("notify checkpoint %d aborted: %w", m.id, err)
			}
		}
	case mailCommitResult:
		r := m.payload.(commitResult)
		if r.failed != nil {
			return fmt.Errorf("committer: %w", r.failed)
		}
		t.sinkOp.committed(r)
		upTo := t.sinkOp.notified
		if t.sinkOp.anyInFlight() {
			upTo = r.upTo // everything up to r.upTo is committed; later jobs are still running
		}
		t.reportCommitted(upTo, r.committed)
	case mailShutdown:
		t.shutdown = true
	}
	return nil
}

// reportCommitted tells the coordinator that every committable of
// checkpoints up to upTo is committed (for the global committer and for the
// end of a bounded job).
func (t *task) reportCommitted(upTo int64, committed []pendingCommittable) {
	t.env.att.inbox.Put(committedMsg{sender: t.env.self(), upTo: upTo, committed: committed})
}

// checkpoint snapshots the subtask for checkpoint id, forwards the barrier
// and acknowledges to the coordinator. Sources call it on a trigger, other
// tasks when the barrier is aligned on all inputs.
func (t *task) checkpoint(id int64) error {
	var states []checkpoint.TaskState
	v := t.env.v
	if t.src != nil {
		splits, err := t.src.snapshot(id)
		if err != nil {
			return err
		}
		states = append(states, checkpoint.TaskState{Vertex: v.head().UID(), Subtask: t.env.subtask, Parallelism: v.parallelism,
			Parts: map[string][][]byte{partSplits: splits}})
	}
	if t.sinkOp != nil {
		parts := map[string][][]byte{}
		if err := t.sinkOp.barrier(id, parts); err != nil {
			return err
		}
		states = append(states, checkpoint.TaskState{Vertex: t.sinkNode.UID(), Subtask: t.env.subtask, Parallelism: v.parallelism, Parts: parts})
	}
	for _, o := range t.outs {
		o.broadcast(msgBarrier, id)
	}
	t.countOut()
	t.env.att.inbox.Put(ackMsg{sender: t.env.self(), id: id, states: states})
	return nil
}

// barrier is called by the gate once barrier id is on every input.
func (t *task) barrier(id int64) error { return t.checkpoint(id) }

func (t *task) emitWatermark(wm int64) {
	for _, o := range t.outs {
		o.broadcast(msgWatermark, wm)
	}
	if t.sinkOp != nil {
		if err := t.sinkOp.watermark(wm); err != nil {
			t.env.fail(fmt.Errorf("write watermark: %w", err))
		}
	}
}

func (t *task) markIdle() {
	for _, o := range t.outs {
		o.broadcast(msgIdle, 0)
	}
}

func (t *task) endOfInput() error {
	if t.ended {
		return nil
	}
	t.ended = true
	if t.src != nil {
		t.emitWatermark(endWatermark)
	}
	if t.sinkOp != nil {
		if err := t.sinkOp.endInput(); err != nil {
			return err
		}
	}
	for _, o := range t.outs {
		o.broadcast(msgEnd, 0)
	}
	t.countOut()
	t.env.att.inbox.Put(taskFinishedMsg{t.env.self()})
	return nil
}

func (t *task) close() error {
	for _, o := range t.outs {
		o.close()
	}
	if t.gate != nil {
		t.gate.close()
	}
	var errs []error
	if t.src != nil {
		if err := callSafely(t.env.log(), "Reader.Close", t.src.close); err != nil {
			errs = append(errs, fmt.Errorf("close reader: %w", err))
		}
	}
	if t.sinkOp != nil {
		if err := t.sinkOp.close(); err != nil {
			errs = append(errs, fmt.Errorf("close sink: %w", err))
		}
	}
	return errors.Join(errs...)
}

// TaskError is a failure of one subtask, or of a coordinator-side part
// (an enumerator, a global committer). It names the operator (chain) and
// the subtask and wraps the cause.
type TaskError struct {
	// Operator names the failed operator chain ("src -> map -> sink") or
	// coordinator part ("src (enumerator)").
	Operator string
	// Subtask is the failed subtask, or -1 for coordinator-side parts.
	Subtask int
	Err     error
}

func (e *TaskError) Error() string {
	if e.Subtask < 0 {
		return fmt.Sprintf("%s: %v", e.Operator, e.Err)
	}
	return fmt.Sprintf("%s (subtask %d): %v", e.Operator, e.Subtask, e.Err)
}

func (e *TaskError) Unwrap() error { return e.Err }
