package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
)

// attempt is one run of the job's tasks between two global failures. Its
// coordinator goroutine (the one calling run) owns the enumerators and the
// parts that decide: the checkpoint tracker (tracker.go), sink commit
// tracking (commits.go), savepoints (savepoint.go) and failover
// (failover.go). Parts only decide; the attempt performs what they decide
// (posting mails to tasks, starting goroutines, calling connectors).
type attempt struct {
	job        *Job
	number     int
	restoredID int64
	restore    *checkpoint.Snapshot

	ctx       context.Context // cancelled to stop tasks and async work
	cancel    context.CancelFunc
	inbox     *queue[coordMsg]
	wg        sync.WaitGroup // async calls, saves, global commits, region waits
	taskWG    sync.WaitGroup // task goroutines
	timeout   *time.Timer    // the pending checkpoint's deadline
	finalID   int64          // the final checkpoint, once it completed
	done      bool           // the final checkpoint is committed everywhere
	finishing atomic.Bool    // done: tasks are shutting down

	// The job's tasks and their channels, vertices by id, and the
	// goroutines of each region's current tasks.
	tasks      map[*vertex][]*task
	channels   map[*edge]any
	vertexByID map[string]*vertex
	regions    []*regionRun

	// Enumerators, and the mails they send while being snapshotted,
	// held back until the checkpoint's triggers are out.
	enums       map[*vertex]*enumContext
	enumFailure error // set by EnumeratorContext.FailJob
	holding     bool
	held        []heldMail

	// The deciding parts.
	tr    *tracker
	sinks *sinkCommits
	sps   savepoints
	fo    *failover

	// align holds the watermark alignment groups of this attempt
	// (alignment.go); the zero value is ready.
	align alignGroups
}

// sinkTrack follows the commits of one sink's subtasks (see sinkCommits in
// commits.go).
type sinkTrack struct {
	node       *Node
	upTo       []int64
	items      []pendingCommittable // committed by the subtasks, not yet globally
	batch      []pendingCommittable // handed to the running global commit
	gc         sink.ErasedGlobalCommitter
	globalDone int64
	running    bool
}

// enumContext is the shared, untyped part of an EnumeratorContext.
type enumContext struct {
	att         *attempt
	v           *vertex
	parallelism int
	readers     map[int]source.ReaderInfo
	enum        enumHandle
	metrics     metrics.Group
}

func (c *enumContext) Parallelism() int { return c.parallelism }
func (c *enumContext) RegisteredReaders() map[int]source.ReaderInfo {
	return maps.Clone(c.readers)
}
func (c *enumContext) Metrics() metrics.Group { return c.metrics }

func (c *enumContext) assign(subtask int, splits any) {
	c.att.fo.assign(taskKey{c.v.id, subtask}, splits)
	c.att.post(c.v, subtask, mail{kind: mailAddSplits, payload: splits})
}

// post delivers a mail from the enumerator side to a reader. While the
// coordinator snapshots enumerators for a checkpoint, such mails are held
// back and delivered after the checkpoint's triggers, so that a split
// assigned after an enumerator's snapshot reaches its reader after the
// reader's snapshot (Flink closes its operator-event gateways the same way).
func (a *attempt) post(v *vertex, subtask int, m mail) {
	if a.holding {
		a.held = append(a.held, heldMail{v, subtask, m})
		return
	}
	a.tasks[v][subtask].env.post(m)
}

type heldMail struct {
	v       *vertex
	subtask int
	m       mail
}

func (c *enumContext) FailJob(err error) {
	if err != nil && c.att.enumFailure == nil {
		c.att.enumFailure = enumError(c.v, "failed", err)
	}
}

func (c *enumContext) SignalNoMoreSplits(subtask int) {
	if subtask < 0 || subtask >= c.parallelism {
		return
	}
	c.att.post(c.v, subtask, mail{kind: mailNoMoreSplits})
}

func (c *enumContext) SendEventToReader(subtask int, e source.Event) {
	if subtask < 0 || subtask >= c.parallelism {
		return
	}
	c.att.post(c.v, subtask, mail{kind: mailEvent, payload: e})
}

func (c *enumContext) CallAsync(fn func(context.Context) (any, error), handler func(any, error), delay, period time.Duration) {
	a := c.att
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		wait := delay
		for {
			if wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-a.ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			} else if a.ctx.Err() != nil {
				return
			}
			res, err, perr := c.callAsync(fn)
			if a.ctx.Err() != nil {
				return
			}
			if perr != nil {
				// fn panicked: the job fails (naming the source's
				// enumerator); a periodic call is not repeated.
				a.inbox.Put(asyncMsg{v: c.v, err: perr})
				return
			}
			a.inbox.Put(asyncMsg{v: c.v, handler: func() { handler(res, err) }})
			if period <= 0 {
				return
			}
			wait = period
		}
	}()
}

// callAsync runs a CallAsync function, turning a panic into perr.
func (c *enumContext) callAsync(fn func(context.Context) (any, error)) (res any, err, perr error) {
	defer recoverTo(&perr, c.log(), "CallAsync function")
	res, err = fn(c.att.ctx)
	return res, err, nil
}

func (c *enumContext) log() *slog.Logger {
	return c.att.job.log.With("operator", c.v.head().name, "subtask", "coordinator")
}

func newAttempt(j *Job, number int, restore *checkpoint.Snapshot) *attempt {
	a := &attempt{job: j, number: number, restore: restore, inbox: newQueue[coordMsg](),
		tasks: map[*vertex][]*task{}, enums: map[*vertex]*enumContext{}, sinks: newSinkCommits(),
		vertexByID: map[string]*vertex{},
		fo:         newFailover(j.cfg.Failover, j.regions, j.regionOf, 0)}
	if restore != nil {
		a.restoredID = restore.ID
		a.fo.checkpointBegins(restore.ID)
	}
	return a
}

// run executes the attempt until the job finishes, fails or ctx ends. It
// returns nil when the job finished.
func (a *attempt) run(ctx context.Context) error {
	a.ctx, a.cancel = context.WithCancel(ctx)
	defer a.cancel()
	err := a.guard(a.setup)
	if err == nil {
		err = a.guard(func() error { return a.loop(ctx) })
	}
	if terr := a.teardown(); err == nil {
		err = terr
	}
	return err
}

// guard turns a panic on the coordinator goroutine (in an enumerator, say)
// into a job failure instead of a crash of the process.
func (a *attempt) guard(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &TaskError{Operator: "coordinator", Subtask: -1, Err: panicError(a.job.log, "", r)}
		}
	}()
	return fn()
}

func (a *attempt) setup() error {
	j := a.job
	states, err := redistribute(j.vertices, a.restore)
	if err != nil {
		return err
	}
	keys := a.newTasks()
	a.tr = newTracker(keys, j.nextCheckpointID, j.cfg.CheckpointTimeout, j.cfg.MinPauseBetweenCheckpoints, j.cfg.TolerableCheckpointFailures)
	if err := a.buildTasks(states); err != nil {
		return err
	}
	for _, v := range j.vertices {
		if v.tail().kind == kindSink {
			st, err := a.newSinkTrack(v)
			if err != nil {
				return err
			}
			a.sinks.add(st)
		}
	}
	if err := a.startEnumerators(); err != nil {
		return err
	}
	for _, v := range j.vertices {
		for i, t := range a.tasks[v] {
			a.startTask(t, a.regions[j.regionOf[taskKey{v.id, i}]].wg)
		}
	}
	return nil
}

// newTasks creates the channels, the regions and every task (not built
// yet), and returns the subtasks in order.
func (a *attempt) newTasks() []taskKey {
	j := a.job
	a.channels = map[*edge]any{}
	for _, v := range j.vertices {
		for _, e := range v.outputs {
			a.channels[e] = e.from.out.newChannels(v.parallelism, e.to.parallelism, e.part == Forward, j.cfg.ChannelCapacity)
		}
	}
	a.regions = make([]*regionRun, len(j.regions))
	for i := range a.regions {
		rs := &regionRun{wg: &sync.WaitGroup{}}
		rs.ctx, rs.cancel = context.WithCancel(a.ctx)
		a.regions[i] = rs
	}
	var keys []taskKey
	for _, v := range j.vertices {
		a.vertexByID[v.id] = v
		ts := make([]*task, v.parallelism)
		for i := range ts {
			k := taskKey{v.id, i}
			ts[i] = a.newTask(v, i, a.regions[j.regionOf[k]].ctx, 0, a.number, a.restoredID)
			keys = append(keys, k)
		}
		a.tasks[v] = ts
	}
	return keys
}

// buildTasks builds every task before anything runs, so a bad operator
// fails fast and enumerators can address every reader's mailbox. If one
// fails, those built are closed.
func (a *attempt) buildTasks(states map[taskKey]map[string]*checkpoint.TaskState) error {
	j := a.job
	complete := false
	defer func() {
		if complete {
			return
		}
		for _, v := range j.vertices {
			for _, t := range a.tasks[v] {
				if t.src != nil || t.sinkOp != nil {
					_ = t.close()
				}
			}
		}
	}()
	for _, v := range j.vertices {
		for i, t := range a.tasks[v] {
			if err := t.build(a.channels, states[taskKey{v.id, i}]); err != nil {
				return &TaskError{Operator: v.describe(), Subtask: i, Err: err}
			}
		}
	}
	complete = true
	return nil
}

// newSinkTrack sets up the commit tracking and the global committer of the
// sink that ends v, from the built sink subtasks and the restored global
// committables.
func (a *attempt) newSinkTrack(v *vertex) (*sinkTrack, error) {
	n := v.tail()
	st := &sinkTrack{node: n, upTo: make([]int64, v.parallelism), globalDone: a.restoredID}
	rerun := false
	for i := range st.upTo {
		st.upTo[i] = a.tasks[v][i].sinkOp.committedUpTo(a.restoredID)
		rerun = rerun || st.upTo[i] < a.restoredID
	}
	if a.restore != nil {
		for _, ts := range a.restore.Tasks {
			if ts.Vertex != n.UID()+globalSuffix {
				continue
			}
			items, err := decodeCommittables(ts.Parts[partCommittables])
			if err != nil {
				return nil, &TaskError{Operator: n.name + " (global committer)", Subtask: -1, Err: err}
			}
			st.items = append(st.items, items...)
		}
	}
	if rerun || len(st.items) > 0 {
		// The global committer sees the restored checkpoint's
		// committables again (it must be idempotent).
		st.globalDone = a.restoredID - 1
	}
	gctx := &coordInitContext{att: a, node: n, parallelism: v.parallelism}
	gc, err := n.sink.newGlobal(gctx)
	if err != nil {
		return nil, &TaskError{Operator: n.name + " (global committer)", Subtask: -1, Err: fmt.Errorf("create: %w", err)}
	}
	st.gc = gc
	return st, nil
}

// startEnumerators creates every source's enumerator (from its restored
// state), starts it and registers its readers.
func (a *attempt) startEnumerators() error {
	j := a.job
	for _, v := range j.vertices {
		head := v.head()
		if head.kind != kindSource {
			continue
		}
		ec := &enumContext{att: a, v: v, parallelism: v.parallelism, readers: map[int]source.ReaderInfo{},
			metrics: j.metricRoot.With("operator", head.name).With("subtask", "coordinator")}
		var state []byte
		if a.restore != nil {
			state = a.restore.Enumerators[head.UID()]
		}
		e, err := head.src.newEnumerator(ec, state)
		if err != nil {
			return enumError(v, "create enumerator", err)
		}
		ec.enum = e
		a.enums[v] = ec
	}
	for _, ec := range a.enumsInOrder() {
		// In the local runtime every reader exists from the start: they are
		// registered before Start (so Start may assign to them), and
		// AddReader follows for each.
		for i := range ec.parallelism {
			ec.readers[i] = source.ReaderInfo{Subtask: i, Location: "local"}
		}
		if err := ec.enum.start(a.ctx); err != nil {
			return enumError(ec.v, "start enumerator", err)
		}
		for i := range ec.parallelism {
			if err := ec.enum.addReader(i); err != nil {
				return enumError(ec.v, fmt.Sprintf("add reader %d", i), err)
			}
		}
	}
	return nil
}

// newTask creates (but does not build) subtask i of v.
func (a *attempt) newTask(v *vertex, i int, ctx context.Context, gen, attemptNo int, restoredID int64) *task {
	env := &taskEnv{att: a, v: v, subtask: i, ctx: ctx, mailbox: newQueue[mail](), gen: gen, attemptNo: attemptNo, restoredID: restoredID}
	env.metrics = env.nodeMetrics(v.head())
	t := &task{env: env}
	env.t = t
	t.outCount = env.nodeMetrics(v.tail()).Counter(metrics.NumRecordsOut)
	t.inCount = env.metrics.Counter(metrics.NumRecordsIn)
	return t
}

// startTask runs a built task on a goroutine of its own.
func (a *attempt) startTask(t *task, region *sync.WaitGroup) {
	a.taskWG.Add(1)
	region.Add(1)
	go func() {
		defer a.taskWG.Done()
		defer region.Done()
		err := t.run()
		a.inbox.Put(taskExitedMsg{sender: t.env.self(), err: err})
	}()
}

func (a *attempt) enumsInOrder() []*enumContext {
	var out []*enumContext
	for _, v := range a.job.vertices {
		if ec := a.enums[v]; ec != nil {
			out = append(out, ec)
		}
	}
	return out
}

func (a *attempt) loop(ctx context.Context) error {
	cfg := &a.job.cfg
	var trigger <-chan time.Time
	if cfg.CheckpointInterval > 0 {
		tk := time.NewTicker(cfg.CheckpointInterval)
		defer tk.Stop()
		trigger = tk.C
	}
	a.timeout = time.NewTimer(time.Hour)
	a.timeout.Stop()
	defer a.timeout.Stop()
	var msgs []coordMsg
	stopC := a.job.stopC
	for !a.done {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.inbox.Ready():
			msgs = a.inbox.Drain(msgs)
			for _, m := range msgs {
				if a.done {
					break
				}
				if err := a.handle(m); err != nil {
					return err
				}
			}
			clear(msgs)
		case <-stopC:
			a.sps.stop()
			stopC = nil // seen; do not select it again
		case req := <-a.job.spC:
			a.requestSavepoint(req)
		case <-trigger:
			if !a.sps.stopping && !a.fo.allFinished() && !a.fo.anyDown() && a.tr.canTrigger(time.Now()) == nil {
				if err := a.trigger(false); err != nil {
					return err
				}
			}
		case now := <-a.timeout.C:
			if p := a.tr.expired(now); p != nil {
				if err := a.checkpointFailed(p.id, fmt.Errorf("checkpoint %d expired after %s", p.id, cfg.CheckpointTimeout)); err != nil {
					return err
				}
			}
		}
		if a.enumFailure != nil {
			return a.enumFailure
		}
		if err := a.maybeRestartRegions(); err != nil {
			return err
		}
		if err := a.maybeSavepoint(); err != nil {
			return err
		}
		if err := a.maybeFinish(); err != nil {
			return err
		}
	}
	return nil
}

func (a *attempt) handle(m coordMsg) error {
	if tm, ok := m.(taskMsg); ok && a.fo.stale(tm.from()) {
		return nil // from a task of a region that was restarted since
	}
	switch m := m.(type) {
	case splitRequestMsg:
		if err := a.enums[m.v].enum.handleSplitRequest(m.subtask, "local"); err != nil {
			return enumError(m.v, "handle split request", err)
		}
	case readerEventMsg:
		if err := a.enums[m.v].enum.handleEvent(m.subtask, m.event); err != nil {
			return enumError(m.v, "handle source event", err)
		}
	case asyncMsg:
		if m.err != nil {
			return enumError(m.v, "async call", m.err)
		}
		if err := callSafely(a.enums[m.v].log(), "CallAsync handler", func() error { m.handler(); return nil }); err != nil {
			return enumError(m.v, "async handler", err)
		}
	case ackMsg:
		p, err := a.tr.ack(m.id, m.key(), m.states)
		if err != nil {
			return err
		}
		if p != nil {
			p.states = append(p.states, a.sinks.globalStates()...)
			a.persist(p)
		}
	case savedMsg:
		p := m.p
		intermediate, err := a.savepointSaved(p, m.info, m.err)
		if intermediate || err != nil {
			return err
		}
		if m.err != nil {
			return a.checkpointFailed(p.id, fmt.Errorf("persist checkpoint %d: %w", p.id, m.err))
		}
		return a.checkpointComplete(p, m.info.Size)
	case taskFinishedMsg:
		a.fo.taskFinished(m.key())
	case taskExitedMsg:
		err := m.err
		if err == nil {
			err = &TaskError{Operator: m.v.describe(), Subtask: m.subtask, Err: errors.New("task exited unexpectedly")}
		}
		return a.taskFailed(m.key(), err)
	case regionReadyMsg:
		return a.regionReady(m)
	case committedMsg:
		a.startGlobal(a.sinks.committed(m.node, m.subtask, m.upTo, m.committed))
	case globalDoneMsg:
		gc, err := a.sinks.globalDone(m.node, m.upTo, m.err)
		if err != nil {
			return err
		}
		a.startGlobal(gc)
	}
	return nil
}

func enumError(v *vertex, what string, err error) error {
	return &TaskError{Operator: v.head().name + " (enumerator)", Subtask: -1, Err: fmt.Errorf("%s: %w", what, err)}
}

// trigger starts a checkpoint: enumerators first, then a trigger into every
// source task's mailbox (DESIGN §3).
func (a *attempt) trigger(final bool) error {
	id := a.tr.nextID
	if a.job.beforeTrigger != nil {
		a.job.beforeTrigger(id)
	}
	// Assignments from here on are not in this checkpoint's reader states.
	a.fo.checkpointBegins(id)
	enums := map[string][]byte{}
	a.holding = true
	defer a.releaseHeld()
	for _, ec := range a.enumsInOrder() {
		b, err := ec.enum.snapshot(id)
		if err != nil {
			return enumError(ec.v, fmt.Sprintf("snapshot at checkpoint %d", id), err)
		}
		enums[ec.v.head().UID()] = b
	}
	if final {
		a.sps.final(id)
	}
	a.tr.begin(time.Now(), final, enums)
	a.job.nextCheckpointID = a.tr.nextID
	a.timeout.Reset(a.job.cfg.CheckpointTimeout)
	for _, v := range a.job.vertices {
		if v.head().kind != kindSource {
			continue
		}
		for _, t := range a.tasks[v] {
			t.env.post(mail{kind: mailTrigger, id: id, payload: final && a.sps.stopping})
		}
	}
	return nil
}

func (a *attempt) releaseHeld() {
	a.holding = false
	for _, h := range a.held {
		a.tasks[h.v][h.subtask].env.post(h.m)
	}
	clear(a.held)
	a.held = a.held[:0]
}

func (a *attempt) persist(p *pendingCheckpoint) {
	j := a.job
	snap := &checkpoint.Snapshot{ID: p.id, Kind: checkpoint.Checkpoint, JobName: j.name, Timestamp: p.started,
		Enumerators: p.enumerators, Tasks: p.states, Properties: map[string]string{JobIDProperty: j.id}}
	for _, v := range j.vertices {
		for _, n := range v.nodes {
			snap.Properties["parallelism/"+n.UID()] = fmt.Sprint(v.parallelism)
		}
	}
	sp := a.sps.of(p.id)
	if sp != nil {
		snap.Kind = checkpoint.Savepoint
	}
	p.kind = snap.Kind
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		var info checkpoint.Info
		// The storage is pluggable: a panic in it fails the checkpoint.
		err := callSafely(j.log, "checkpoint storage", func() (err error) {
			if sp != nil {
				info, err = checkpoint.SaveSavepoint(a.ctx, sp.dir, snap)
			} else {
				info, err = j.storage.Save(a.ctx, snap)
			}
			return err
		})
		if err == nil && info.Warning != nil {
			j.log.Warn("checkpoint saved with a warning", "id", snap.ID, "warning", info.Warning)
		}
		j.mu.Lock()
		// An intermediate savepoint is no restore point for failover: its
		// side effects are not committed.
		if err == nil && (sp == nil || sp.stop) {
			j.latest = snap
		}
		j.mu.Unlock()
		a.inbox.Put(savedMsg{p: p, info: info, err: err})
	}()
}

func (a *attempt) checkpointComplete(p *pendingCheckpoint, size int64) error {
	now := time.Now()
	a.tr.complete(p.id, now)
	j := a.job
	j.stats.completed(CompletedCheckpoint{ID: p.id, Kind: p.kind, Completed: now, Duration: now.Sub(p.started), Size: size})
	j.log.Debug("checkpoint complete", "id", p.id, "final", p.final, "duration", now.Sub(p.started), "size", size)
	a.fo.checkpointComplete(p.id)
	for _, v := range j.vertices {
		for _, t := range a.tasks[v] {
			t.env.post(mail{kind: mailComplete, id: p.id})
		}
	}
	for _, ec := range a.enumsInOrder() {
		if err := ec.enum.notifyComplete(p.id); err != nil {
			return enumError(ec.v, fmt.Sprintf("notify checkpoint %d complete", p.id), err)
		}
	}
	if p.final {
		a.finalID = p.id
	}
	return nil
}

func (a *attempt) checkpointFailed(id int64, cause error) error {
	j := a.job
	if handled, err := a.savepointFailed(id, cause); handled {
		return err
	}
	j.stats.failed()
	j.log.Warn("checkpoint failed", "id", id, "error", cause)
	if a.tr.fail(id, time.Now()) {
		return fmt.Errorf("%w (tolerable checkpoint failures: %d)", cause, j.cfg.TolerableCheckpointFailures)
	}
	return a.notifyAborted(id)
}

// notifyAborted tells every task and enumerator that checkpoint id was
// aborted.
func (a *attempt) notifyAborted(id int64) error {
	j := a.job
	for _, v := range j.vertices {
		for _, t := range a.tasks[v] {
			t.env.post(mail{kind: mailAbort, id: id})
		}
	}
	for _, ec := range a.enumsInOrder() {
		if err := ec.enum.notifyAborted(id); err != nil {
			return enumError(ec.v, fmt.Sprintf("notify checkpoint %d aborted", id), err)
		}
	}
	return nil
}

// startGlobal runs a global commit that sinkCommits decided on (if any) on
// a goroutine of its own; it reports back with a globalDoneMsg.
func (a *attempt) startGlobal(gc *globalCommit) {
	if gc == nil {
		return
	}
	st := a.sinks.byNode[gc.node]
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		log := a.job.log.With("operator", gc.node.name, "subtask", "global committer")
		err := callSafely(log, "GlobalCommitter.CommitGlobal", func() error { return st.gc.CommitGlobal(a.ctx, gc.upTo, gc.batch) })
		a.inbox.Put(globalDoneMsg{node: gc.node, upTo: gc.upTo, err: err})
	}()
}

// maybeFinish takes the final checkpoint once every task reached the end of
// its input, and ends the attempt once that checkpoint is committed.
// A stop request takes the final checkpoint right away (once no other
// checkpoint is pending); sources stop reading at its barrier.
func (a *attempt) maybeFinish() error {
	if (!a.fo.allFinished() && !a.sps.stopping) || a.fo.anyDown() {
		return nil
	}
	if a.finalID == 0 {
		if a.tr.pending == nil {
			return a.trigger(true)
		}
		return nil
	}
	if !a.sinks.doneUpTo(a.finalID) {
		return nil
	}
	a.done = true
	return nil
}

// teardown stops every task and async call and releases enumerators. After
// a finished job the tasks shut down on their own; an error on the way out
// (closing a writer, say) is returned.
func (a *attempt) teardown() error {
	var err error
	a.dropSavepoints(errors.New("the job ended or failed"))
	if a.done {
		// Everything is committed. Tasks end on the shutdown mail. Nothing
		// should be in flight behind the final barrier (sources stopped or
		// ended), but the cancel releases any task still blocked anyway,
		// and is not an error now.
		a.finishing.Store(true)
		for _, v := range a.job.vertices {
			for _, t := range a.tasks[v] {
				t.env.post(mail{kind: mailShutdown})
			}
		}
		a.cancel()
		a.taskWG.Wait()
		for _, m := range a.inbox.Drain(nil) {
			if m, ok := m.(taskExitedMsg); ok && m.err != nil && err == nil {
				err = m.err
			}
		}
	}
	a.cancel()
	a.taskWG.Wait()
	a.wg.Wait()
	for _, ec := range a.enumsInOrder() {
		if err := ec.enum.close(); err != nil {
			a.job.log.Warn("close enumerator", "operator", ec.v.head().name, "error", err)
		}
	}
	for _, st := range a.sinks.tracks {
		if st.gc != nil {
			log := a.job.log.With("operator", st.node.name, "subtask", "global committer")
			if err := callSafely(log, "GlobalCommitter.Close", st.gc.Close); err != nil {
				a.job.log.Warn("close global committer", "operator", st.node.name, "error", err)
			}
		}
	}
	return err
}

type coordInitContext struct {
	att         *attempt
	node        *Node
	parallelism int
}

func (c *coordInitContext) SubtaskIndex() int    { return 0 }
func (c *coordInitContext) Parallelism() int     { return c.parallelism }
func (c *coordInitContext) Attempt() int         { return c.att.number }
func (c *coordInitContext) JobName() string      { return c.att.job.name }
func (c *coordInitContext) JobID() string        { return c.att.job.id }
func (c *coordInitContext) OperatorName() string { return c.node.name }
func (c *coordInitContext) OperatorUID() string  { return c.node.UID() }
func (c *coordInitContext) RestoredCheckpointID() (int64, bool) {
	return c.att.restoredID, c.att.restoredID > 0
}
func (c *coordInitContext) CheckpointInterval() time.Duration {
	return c.att.job.cfg.CheckpointInterval
}
func (c *coordInitContext) Metrics() metrics.Group {
	return c.att.job.metricRoot.With("operator", c.node.name).With("subtask", "coordinator")
}
