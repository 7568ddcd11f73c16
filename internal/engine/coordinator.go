package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/internal/sinkrt"
	"github.com/sluice-io/sluice/metrics"
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

	ctx     context.Context // cancelled to stop tasks and async work
	cancel  context.CancelFunc
	inbox   *queue[coordMsg]
	wg      sync.WaitGroup // async calls, saves, global commits, region waits
	taskWG  sync.WaitGroup // task goroutines
	timeout *time.Timer    // the pending checkpoint's deadline
	finalID int64          // the final checkpoint, once it completed
	// lastCompleted is the latest checkpoint completed in this attempt and
	// committedSent the latest whose committed notice the source tasks were
	// sent (both start at the restored checkpoint).
	lastCompleted, committedSent int64
	done                         bool        // the final checkpoint is committed everywhere
	finishing                    atomic.Bool // done: tasks are shutting down

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

	// pl is where the regions run (placement.go); hosted marks the
	// host-side attempt of a task host in another process than its
	// coordinator (remotehost.go).
	pl     placement
	hosted bool
	// lastMove is when maybeMove last moved a region (zero: never).
	lastMove time.Time
	// hostWaits are the regions whose host was lost and that wait for a
	// host to link before they restart (Config.LostHostWait); hostWaitTick
	// wakes the loop to look again while any waits.
	hostWaits    map[int]hostWait
	hostWaitTick *time.Ticker
}

// sinkTrack follows the commits of one sink's subtasks (see sinkCommits in
// commits.go).
type sinkTrack struct {
	node       *Node
	upTo       []int64
	items      []pendingCommittable // committed by the subtasks, not yet globally
	batch      []pendingCommittable // handed to the running global commit
	gc         sinkrt.GlobalCommitter
	globalDone int64
	running    bool
}

func newAttempt(j *Job, number int, restore *checkpoint.Snapshot) *attempt {
	a := &attempt{job: j, number: number, restore: restore, inbox: newQueue[coordMsg](),
		tasks: map[*vertex][]*task{}, enums: map[*vertex]*enumContext{}, sinks: newSinkCommits(),
		vertexByID: map[string]*vertex{},
		fo:         newFailover(j.cfg.Failover, j.regions, j.regionOf, 0)}
	if restore != nil {
		a.restoredID = restore.ID
		a.lastCompleted, a.committedSent = restore.ID, restore.ID
		a.fo.checkpointBegins(restore.ID)
	}
	return a
}

// run executes the attempt until the job finishes, fails or ctx ends. It
// returns nil when the job finished.
func (a *attempt) run(ctx context.Context) error {
	a.ctx, a.cancel = context.WithCancel(ctx)
	defer a.cancel()
	err := a.setupStoppable()
	if err == nil {
		err = a.guard(func() error { return a.loop(ctx) })
	}
	if terr := a.teardown(); err == nil {
		err = terr
	}
	return err
}

// errStoppedStarting ends an attempt that was asked to stop while it was
// still being set up (writers and enumerators created: a sink's writer may
// block there, e.g. on an unreachable broker). There is no running job to
// take a final checkpoint of yet, so the stop cancels instead; it wraps
// context.Canceled.
var errStoppedStarting = fmt.Errorf("stop requested while the job was starting, before its tasks ran: %w", context.Canceled)

// stopDuringStartGrace is how long a stop waits for a start in progress
// before it cancels the start.
const stopDuringStartGrace = 5 * time.Second

// setupStoppable runs setup and, should Stop be called meanwhile and setup
// not end within stopDuringStartGrace, cancels it: the attempt then ends
// with errStoppedStarting. A stop that comes once setup is done (or that
// setup outlives within the grace) is the coordinator loop's: a final
// checkpoint.
func (a *attempt) setupStoppable() error {
	done := make(chan struct{})
	var stopped atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-a.job.stopC:
		case <-done:
			return
		}
		// A start that finishes soon gets its final checkpoint as usual.
		t := time.NewTimer(stopDuringStartGrace)
		defer t.Stop()
		select {
		case <-t.C:
			stopped.Store(true)
			a.cancel()
		case <-done:
		}
	}()
	err := a.guard(a.setup)
	close(done)
	wg.Wait()
	if stopped.Load() {
		return errStoppedStarting
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
	if err := a.placeTasks(); err != nil {
		return err
	}
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
			a.sinks.add(v.id, st)
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
				if t.src != nil || t.sinkOp != nil || t.gate != nil || len(t.outs) > 0 {
					_ = t.close()
				}
			}
		}
	}()
	rt, err := a.routesFor(Local.ID())
	if err != nil {
		return err
	}
	var remote []*task
	for _, v := range j.vertices {
		for i, t := range a.tasks[v] {
			if t.remote != nil {
				remote = append(remote, t)
				continue
			}
			if err := t.build(a.channels, states[taskKey{v.id, i}], rt); err != nil {
				return &TaskError{Operator: v.describe(), Subtask: i, Err: err}
			}
		}
	}
	if err := a.deployRemote(remote, states); err != nil {
		return err
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
		st.upTo[i] = a.tasks[v][i].sinkCommittedUpTo(a.restoredID)
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
	gc, err := n.sink.newGlobal(a.ctx, gctx)
	if err != nil {
		return nil, &TaskError{Operator: n.name + " (global committer)", Subtask: -1, Err: fmt.Errorf("create: %w", err)}
	}
	st.gc = gc
	return st, nil
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
	if t.remote != nil {
		t.remote.start(t, func() {
			region.Done()
			a.taskWG.Done()
		})
		return
	}
	go func() {
		defer a.taskWG.Done()
		defer region.Done()
		err := t.run()
		a.inbox.Put(taskExitedMsg{sender: t.env.self(), err: err})
	}()
}

// loop is the coordinator's event loop: it steps on inbox messages, stop
// and savepoint requests, the periodic trigger and the checkpoint timeout,
// then lets the parts' pending decisions (region restarts, a queued
// savepoint, the final checkpoint) act. It returns when the job is done or
// on the first error, which fails the attempt.
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
	defer func() {
		if a.hostWaitTick != nil {
			a.hostWaitTick.Stop()
		}
	}()
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
					return a.rootCause(err)
				}
			}
			clear(msgs)
		case <-stopC:
			a.sps.stop()
			stopC = nil // seen; do not select it again
		case req := <-a.job.spC:
			a.requestSavepoint(req)
		case <-trigger:
			if a.view().periodicDue(a.tr.canTrigger(time.Now())) {
				if err := a.trigger(false); err != nil {
					return err
				}
			}
		case <-a.hostWaitC():
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

// rootCauseWait bounds how long a failure that is only a broken channel
// between hosts waits for the failure that caused it.
const rootCauseWait = time.Second

// rootCause returns the failure that fails the attempt. A broken channel
// between task hosts is usually the echo of its peer's failure, whose exit
// may arrive later (from another host): for up to rootCauseWait it looks
// for another task's failure in the inbox and returns that one instead, so
// that the restart strategy and the job's failures see the cause.
func (a *attempt) rootCause(err error) error {
	if !errors.Is(err, ErrEdgeBroken) {
		return err
	}
	t := time.NewTimer(rootCauseWait)
	defer t.Stop()
	var msgs []coordMsg
	for {
		select {
		case <-a.inbox.Ready():
		case <-t.C:
			return err
		case <-a.ctx.Done():
			return err
		}
		msgs = a.inbox.Drain(msgs)
		for _, m := range msgs {
			if m, ok := m.(taskExitedMsg); ok && m.err != nil && !errors.Is(m.err, ErrEdgeBroken) && !errors.Is(m.err, context.Canceled) {
				return m.err
			}
		}
		clear(msgs)
	}
}

// handle steps on one inbox message. Messages of tasks that a regional
// restart replaced are dropped.
func (a *attempt) handle(m coordMsg) error {
	if tm, ok := m.(taskMsg); ok && a.fo.stale(tm.from()) {
		return nil // from a task of a region that was restarted since
	}
	switch m := m.(type) {
	case splitRequestMsg:
		v := a.vertexByID[m.vertex]
		if err := a.enums[v].enum.handleSplitRequest(m.subtask, "local"); err != nil {
			return enumError(v, "handle split request", err)
		}
	case readerEventMsg:
		v := a.vertexByID[m.vertex]
		if err := a.enums[v].enum.handleEvent(m.subtask, m.event); err != nil {
			return enumError(v, "handle source event", err)
		}
	case asyncMsg:
		if m.err != nil {
			return enumError(m.v, "async call", m.err)
		}
		if err := callSafely(a.enums[m.v].log(), "CallAsync handler", func() error { m.handler(); return nil }); err != nil {
			return enumError(m.v, "async handler", err)
		}
	case ackMsg:
		return a.acked(m)
	case savedMsg:
		return a.saved(m)
	case taskFinishedMsg:
		a.fo.taskFinished(m.key())
	case taskExitedMsg:
		err := m.err
		if err == nil {
			err = &TaskError{Operator: a.vertexByID[m.vertex].describe(), Subtask: m.subtask, Err: errors.New("task exited unexpectedly")}
		}
		return a.taskFailed(m.key(), err)
	case regionReadyMsg:
		return a.regionReady(m)
	case remoteFailMsg:
		return m.err
	case committedMsg:
		a.startGlobal(a.sinks.committed(m.vertex, m.subtask, m.upTo, m.committed))
		a.notifyCommitted()
	case globalDoneMsg:
		gc, err := a.sinks.globalDone(m.vertex, m.upTo, m.err)
		if err != nil {
			return err
		}
		a.startGlobal(gc)
		a.notifyCommitted()
	}
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
				t.post(mail{kind: mailShutdown})
			}
		}
		a.cancel()
		a.taskWG.Wait()
		for _, m := range a.inbox.Drain(nil) {
			// A channel to another host broken by the shutdown of its
			// peer is no failure now.
			if m, ok := m.(taskExitedMsg); ok && m.err != nil && err == nil && !errors.Is(m.err, ErrEdgeBroken) {
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
