package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-io/sluice/source"
)

// Regional failover (Flink's default failover strategy, "region").
//
// A region is a set of subtasks connected by pipelined exchanges: subtask
// i of a chain that reaches the next vertex only through forward edges is
// in one region with subtask i of that vertex; a rebalance or hash edge
// joins every subtask of both vertices. When a task fails and its region
// is not the whole job, only that region restarts, from the latest
// completed checkpoint, while the other regions keep running:
//
//   - its tasks are cancelled and, once they have all exited, restarted
//     after the restart strategy's delay (regional restarts count against
//     the strategy like global ones);
//   - a pending checkpoint that is not yet being stored is aborted, and no
//     checkpoint starts while a region is down (one being stored completes
//     first, and is the restore point if it succeeds);
//   - its readers are unregistered from their enumerators while down; on
//     restart, the splits assigned to them after the restore checkpoint's
//     enumerator snapshot go back to the enumerator (AddSplitsBack), then
//     the reader registers again (AddReader). Enumerators are not reset.
//     As in Flink, an enumerator that signalled "no more splits" to a
//     reader must do so again on AddReader if it still holds;
//   - its sinks restore writer state and pending committables from the
//     checkpoint and commit those again.
//
// Failures of the coordinator side (enumerators, global committers,
// checkpoint failures beyond the tolerance) and failures of a region that
// spans every task fail over globally.

// Failover selects the failover strategy.
type Failover int

const (
	// FailoverRegion restarts only the failed task's region (the default).
	FailoverRegion Failover = iota
	// FailoverFull restarts the whole job from its latest checkpoint.
	FailoverFull
)

func (f Failover) String() string {
	if f == FailoverFull {
		return "full"
	}
	return "region"
}

// regionWaitBound bounds how long the tasks of a failed region may take to
// exit before the failure escalates to a global failover.
const regionWaitBound = time.Minute

// computeRegions groups the job's subtasks into failover regions, or with
// forwardOnly into forward chains (only forward edges join subtasks).
func computeRegions(vs []*vertex, forwardOnly bool) (regions [][]taskKey, of map[taskKey]int) {
	parent := map[taskKey]taskKey{}
	find := func(k taskKey) taskKey {
		for parent[k] != k {
			parent[k] = parent[parent[k]]
			k = parent[k]
		}
		return k
	}
	union := func(a, b taskKey) { parent[find(a)] = find(b) }
	byHead := map[*Node]*vertex{}
	var keys []taskKey
	for _, v := range vs {
		byHead[v.head()] = v
		for i := range v.parallelism {
			k := taskKey{v.id, i}
			parent[k] = k
			keys = append(keys, k)
		}
	}
	for _, v := range vs {
		for _, e := range v.outputs {
			w := byHead[e.to]
			if e.part == Forward && v.parallelism == w.parallelism {
				for i := range v.parallelism {
					union(taskKey{v.id, i}, taskKey{w.id, i})
				}
				continue
			}
			if forwardOnly {
				continue
			}
			for i := range v.parallelism {
				union(taskKey{v.id, i}, taskKey{w.id, 0})
			}
			for i := range w.parallelism {
				union(taskKey{w.id, i}, taskKey{w.id, 0})
			}
		}
	}
	of = map[taskKey]int{}
	index := map[taskKey]int{}
	for _, k := range keys {
		r := find(k)
		n, ok := index[r]
		if !ok {
			n = len(regions)
			index[r] = n
			regions = append(regions, nil)
		}
		regions[n] = append(regions[n], k)
		of[k] = n
	}
	return regions, of
}

// regionRun holds the goroutines of one region's current tasks.
type regionRun struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     *sync.WaitGroup // its task goroutines
}

// taskFailed handles a task's failure: a regional failover if the job
// allows one, else the error, which fails the attempt (global failover).
func (a *attempt) taskFailed(k taskKey, cause error) error {
	j := a.job
	r, regional := a.fo.regionToRestart(k, a.done)
	if !regional {
		return cause
	}
	delay, again, _ := j.nextRestart(cause)
	if !again {
		return cause // the attempt fails, and so does the job
	}
	j.log.Warn("task failed; restarting its region from the latest completed checkpoint",
		"region", r, "tasks", len(j.regions[r]), "delay", delay, "error", cause)
	if w := j.cfg.LostHostWait; w > 0 && j.cfg.Placement != nil && errors.Is(cause, ErrHostLost) {
		a.waitForHost(r, w)
	}
	return a.takeDown(r, delay, cause)
}

// hostWait is a region's wait for a task host (Config.LostHostWait): it
// restarts once hosts hosts are live, or at until.
type hostWait struct {
	hosts int
	until time.Time
}

// hostWaitPoll is how often the coordinator looks at the live hosts while
// a region waits for one.
const hostWaitPoll = 100 * time.Millisecond

// waitForHost makes region r, whose host was lost, wait up to w for the
// live hosts to be one more than now (the lost one came back, or another
// linked) before it restarts.
func (a *attempt) waitForHost(r int, w time.Duration) {
	if a.hostWaits == nil {
		a.hostWaits = map[int]hostWait{}
	}
	if _, ok := a.hostWaits[r]; ok {
		return
	}
	n := len(a.liveHosts()) + 1
	a.hostWaits[r] = hostWait{hosts: n, until: time.Now().Add(w)}
	a.job.log.Info("region waits for a task host to link before it restarts (lost host wait)",
		"region", r, "wait", w, "hosts", n-1)
	if a.hostWaitTick == nil {
		a.hostWaitTick = time.NewTicker(hostWaitPoll)
	}
}

// hostWaitC is the channel that wakes the loop while a region waits for a
// host (nil: none waits).
func (a *attempt) hostWaitC() <-chan time.Time {
	if a.hostWaitTick == nil {
		return nil
	}
	return a.hostWaitTick.C
}

// waitingForHost reports whether region r still waits for a host: fewer
// live hosts than it waits for, and its wait not over. A region whose wait
// ended is forgotten.
func (a *attempt) waitingForHost(r int, now time.Time) bool {
	w, ok := a.hostWaits[r]
	if !ok {
		return false
	}
	live := len(a.liveHosts())
	if live < w.hosts && now.Before(w.until) && a.ctx.Err() == nil {
		return true
	}
	delete(a.hostWaits, r)
	if live < w.hosts {
		a.job.log.Warn("no task host linked within the lost host wait; restarting the region on the remaining hosts",
			"region", r, "hosts", live)
	} else {
		a.job.log.Info("a task host linked; restarting the region", "region", r, "hosts", live)
	}
	if len(a.hostWaits) == 0 && a.hostWaitTick != nil {
		a.hostWaitTick.Stop()
		a.hostWaitTick = nil
	}
	return false
}

// takeDown cancels region r's tasks for a restart, aborts a pending
// checkpoint that is not being stored, and once the tasks exited and delay
// passed posts that the region may restart (restartRegion).
func (a *attempt) takeDown(r int, delay time.Duration, cause error) error {
	j := a.job
	rs := a.regions[r]
	for _, key := range a.fo.regionDown(r) { // everything the old tasks still send is stale
		v := a.vertexByID[key.vertex]
		if ec := a.enums[v]; ec != nil {
			delete(ec.readers, key.subtask)
		}
	}
	if p := a.tr.pending; p != nil && !p.persisting {
		// It cannot complete without the region's tasks; it is not
		// counted as a failed checkpoint.
		handled, err := a.savepointFailed(p.id, fmt.Errorf("aborted by a regional failover: %w", cause))
		if !handled {
			j.log.Info("checkpoint aborted by a regional failover", "id", p.id)
			a.tr.discard(p.id, time.Now())
			err = a.notifyAborted(p.id)
		}
		if err != nil {
			return err
		}
	}
	rs.cancel()
	wg := rs.wg
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		exited := make(chan struct{})
		a.wg.Add(1)
		go func() { // ends when the tasks do, which teardown waits for
			defer a.wg.Done()
			wg.Wait()
			close(exited)
		}()
		t := time.NewTimer(regionWaitBound)
		defer t.Stop()
		select {
		case <-exited:
		case <-a.ctx.Done():
			return
		case <-t.C:
			a.inbox.Put(regionReadyMsg{region: r,
				err: fmt.Errorf("region %d: tasks did not exit within %s after a failure: %w", r, regionWaitBound, cause)})
			return
		}
		if delay > 0 {
			t.Reset(delay)
			select {
			case <-a.ctx.Done():
				return
			case <-t.C:
			}
		}
		a.inbox.Put(regionReadyMsg{region: r})
	}()
	return nil
}

// maybeMove moves a running region onto a task host with fewer, by
// planMove's rule, right after checkpoint id completed (the restore point
// of the move): at most once per Config.MoveInterval, only with regional
// failover, several regions and no edge between hosts (the units are the
// regions), and only when no region is down, no checkpoint is pending, no
// stop or savepoint is under way and the job is not finishing. A region
// with a subtask that finished its input stays. The region restarts from
// checkpoint id like a failed one, but without counting against the
// restart strategy and without a delay.
func (a *attempt) maybeMove(id int64, now time.Time) error {
	j := a.job
	if j.cfg.Placement == nil || j.cfg.MoveInterval < 0 || a.fo.mode != FailoverRegion || len(j.regions) < 2 ||
		a.pl.chains || a.pl.single != "" || a.done || a.finishing.Load() || a.fo.anyDown() || a.tr.pending != nil ||
		a.sps.stopping || a.sps.stopReq != nil || a.sps.cur != nil || len(a.sps.queue) > 0 ||
		(!a.lastMove.IsZero() && now.Sub(a.lastMove) < j.cfg.MoveInterval) {
		return nil
	}
	u, to, ok := planMove(a.pl.hostOf, a.liveHosts(), func(u int) bool {
		for _, k := range a.pl.units[u] {
			if a.fo.finished[k] {
				return false
			}
		}
		return true
	})
	if !ok {
		return nil
	}
	a.lastMove = now
	r := j.regionOf[a.pl.units[u][0]]
	j.log.Info("moving a region to a task host with fewer regions; it restarts there from the checkpoint",
		"region", r, "from", a.pl.hostOf[u].ID(), "to", to.ID(), "checkpoint", id)
	a.pl.moveTo[u] = to
	return a.takeDown(r, 0, fmt.Errorf("region %d moved from task host %s to %s", r, a.pl.hostOf[u].ID(), to.ID()))
}

// maybeRestartRegions restarts regions whose tasks exited and whose delay
// passed, once no checkpoint is being stored (its outcome decides the
// restore point).
func (a *attempt) maybeRestartRegions() error {
	now := time.Now()
	for _, r := range a.fo.toRestart(a.tr.pending != nil) {
		if a.waitingForHost(r, now) {
			continue
		}
		if err := a.restartRegion(r); err != nil {
			return err
		}
	}
	return nil
}

// restartRegion builds the region's tasks anew from the latest completed
// checkpoint and starts them.
func (a *attempt) restartRegion(r int) error {
	j := a.job
	snap := j.Latest()
	var restoredID int64
	if snap != nil {
		restoredID = snap.ID
	}
	states, err := redistribute(j.vertices, snap)
	if err != nil {
		return err
	}
	rs := a.regions[r]
	rs.ctx, rs.cancel = context.WithCancel(a.ctx)
	rs.wg = &sync.WaitGroup{}
	keys := j.regions[r]
	channels := a.regionChannels(keys)
	j.mu.Lock()
	attemptNo := j.attempts
	j.attempts++
	j.mu.Unlock()
	if _, err := a.placeRestart(r); err != nil {
		return err
	}
	rt, err := a.routesFor(Local.ID())
	if err != nil {
		return err
	}
	var built, remote []*task
	fail := func(err error) error {
		for _, b := range built {
			if b.remote == nil {
				_ = b.close()
			}
		}
		return err
	}
	for _, k := range keys {
		v := a.vertexByID[k.vertex]
		t := a.newTask(v, k.subtask, rs.ctx, a.fo.gen(k), attemptNo, restoredID)
		host := a.pl.hostOfTask(k)
		sess, err := host.session(a)
		if err != nil {
			return fail(fmt.Errorf("place region %d on task host %s: %w", r, host.ID(), err))
		}
		if sess != nil {
			t.remote = sess // built on its host below
			remote = append(remote, t)
		} else if err := t.build(channels, states[k], rt); err != nil {
			return fail(&TaskError{Operator: v.describe(), Subtask: k.subtask, Err: fmt.Errorf("regional restart: %w", err)})
		}
		built = append(built, t)
	}
	if err := a.deployRemote(remote, states); err != nil {
		return fail(fmt.Errorf("regional restart of region %d: %w", r, err))
	}
	for _, t := range built {
		a.tasks[t.env.v][t.env.subtask] = t
		if t.env.v.tail().kind == kindSink {
			a.sinks.restarted(t.env.v.id, t.env.subtask, t.sinkCommittedUpTo(restoredID))
		}
	}
	a.fo.regionUp(r)
	for _, t := range built {
		a.startTask(t, rs.wg)
	}
	if err := a.reregisterReaders(keys, restoredID); err != nil {
		return err
	}
	j.log.Info("region restarted", "region", r, "tasks", len(keys), "checkpoint", restoredID)
	return nil
}

// regionChannels returns the channels for a restart of the region of
// keys: fresh ones for the region's edges, as the old ones may hold
// batches of the failed tasks. (A forward edge's new set is used only by
// the region's subtask; the others keep theirs.)
func (a *attempt) regionChannels(keys []taskKey) map[*edge]any {
	j := a.job
	inRegion := map[string]bool{}
	for _, k := range keys {
		inRegion[k.vertex] = true
	}
	channels := map[*edge]any{}
	for _, v := range j.vertices {
		for _, e := range v.outputs {
			channels[e] = a.channels[e]
			if inRegion[v.id] {
				channels[e] = e.from.out.newChannels(v.parallelism, e.to.parallelism, e.part == Forward, j.cfg.ChannelCapacity)
			}
		}
	}
	return channels
}

// reregisterReaders hands the splits assigned to the restarted readers
// since the restore checkpoint's enumerator snapshot back to their
// enumerators (those it covers are in the restored reader state), then
// registers the readers again.
func (a *attempt) reregisterReaders(keys []taskKey, restoredID int64) error {
	for _, k := range keys {
		v := a.vertexByID[k.vertex]
		ec := a.enums[v]
		if ec == nil {
			continue
		}
		for _, splits := range a.fo.handBack(k, restoredID) {
			if err := ec.enum.addSplitsBack(splits, k.subtask); err != nil {
				return enumError(v, fmt.Sprintf("add splits back from reader %d", k.subtask), err)
			}
		}
		ec.readers[k.subtask] = source.ReaderInfo{Subtask: k.subtask, Location: "local"}
		if err := ec.enum.addReader(k.subtask); err != nil {
			return enumError(v, fmt.Sprintf("add reader %d", k.subtask), err)
		}
	}
	return nil
}

// regionReady handles the message that a failed region may restart.
func (a *attempt) regionReady(m regionReadyMsg) error {
	if m.err != nil {
		return m.err
	}
	a.fo.regionReady(m.region)
	return a.maybeRestartRegions()
}
