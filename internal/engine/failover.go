package engine

// failover is the coordinator's part that decides about failures of tasks
// and regional restarts (region.go explains the protocol). It keeps which
// subtasks finished their input, the generation of every subtask (messages
// of an older generation are stale), which regions are down, and the split
// assignments a restarted reader must hand back. It performs nothing: the
// attempt cancels, rebuilds and starts the tasks it names.
type failover struct {
	mode     Failover
	regions  [][]taskKey     // the job's failover regions
	regionOf map[taskKey]int // region of each subtask

	gens     map[taskKey]int // current generation of each subtask
	finished map[taskKey]bool
	down     []bool // cancelled, not yet restarted
	ready    []bool // its tasks exited and the restart delay passed
	assigned map[taskKey][]assignment
	// epoch is the last checkpoint whose enumerator snapshot began:
	// assignments from then on are not in that checkpoint's reader states.
	epoch int64
}

// assignment is a split assignment the coordinator remembers until a
// checkpoint covers it, so that a regional restart can hand it back.
type assignment struct {
	after  int64 // the last checkpoint whose enumerator snapshot preceded it
	splits any   // []S of the source's split type
}

func newFailover(mode Failover, regions [][]taskKey, regionOf map[taskKey]int, restoredID int64) *failover {
	return &failover{mode: mode, regions: regions, regionOf: regionOf, gens: map[taskKey]int{}, finished: map[taskKey]bool{},
		down: make([]bool, len(regions)), ready: make([]bool, len(regions)), assigned: map[taskKey][]assignment{}, epoch: restoredID}
}

// stale reports whether a message from s comes from a task that a regional
// restart has replaced.
func (f *failover) stale(s sender) bool { return s.gen != f.gens[s.key()] }

// gen is the current generation of subtask k.
func (f *failover) gen(k taskKey) int { return f.gens[k] }

// taskFinished records that subtask k reached the end of its input.
func (f *failover) taskFinished(k taskKey) { f.finished[k] = true }

// allFinished reports whether every subtask reached the end of its input.
func (f *failover) allFinished() bool { return len(f.finished) == len(f.regionOf) }

// regionToRestart decides about the failure of subtask k: it returns k's
// region and true if a regional restart may handle it, false if the whole
// attempt must fail (full failover, a region that spans the job, or an
// attempt that is done).
func (f *failover) regionToRestart(k taskKey, done bool) (int, bool) {
	r := f.regionOf[k]
	if f.mode != FailoverRegion || len(f.regions[r]) == len(f.regionOf) || done {
		return r, false
	}
	return r, true
}

// regionDown records that region r is cancelled for a restart: messages
// of its current tasks become stale and its subtasks are no longer
// finished. It returns the region's subtasks.
func (f *failover) regionDown(r int) []taskKey {
	f.down[r], f.ready[r] = true, false
	for _, k := range f.regions[r] {
		f.gens[k]++
		delete(f.finished, k)
	}
	return f.regions[r]
}

// regionReady records that region r may restart.
func (f *failover) regionReady(r int) { f.ready[r] = true }

// toRestart returns the regions to restart now: down, ready, and no
// checkpoint pending (a checkpoint being stored decides the restore
// point).
func (f *failover) toRestart(checkpointPending bool) []int {
	if checkpointPending {
		return nil
	}
	var out []int
	for r := range f.regions {
		if f.down[r] && f.ready[r] {
			out = append(out, r)
		}
	}
	return out
}

// regionUp records that region r was restarted.
func (f *failover) regionUp(r int) { f.down[r], f.ready[r] = false, false }

// anyDown reports whether a region is being restarted.
func (f *failover) anyDown() bool {
	for _, d := range f.down {
		if d {
			return true
		}
	}
	return false
}

// checkpointBegins records that the enumerators of checkpoint id are being
// snapshotted.
func (f *failover) checkpointBegins(id int64) { f.epoch = id }

// assign remembers splits assigned to reader k (regional failover only).
func (f *failover) assign(k taskKey, splits any) {
	if f.mode != FailoverRegion {
		return
	}
	f.assigned[k] = append(f.assigned[k], assignment{after: f.epoch, splits: splits})
}

// checkpointComplete forgets assignments that checkpoint id covers.
func (f *failover) checkpointComplete(id int64) {
	for k, list := range f.assigned {
		keep := list[:0]
		for _, as := range list {
			if as.after >= id {
				keep = append(keep, as)
			}
		}
		clear(list[len(keep):])
		f.assigned[k] = keep
	}
}

// handBack returns (and forgets) the splits assigned to reader k that a
// restore from checkpoint restoredID does not cover: they go back to the
// enumerator.
func (f *failover) handBack(k taskKey, restoredID int64) []any {
	var out []any
	for _, as := range f.assigned[k] {
		if as.after >= restoredID {
			out = append(out, as.splits)
		}
	}
	f.assigned[k] = nil
	return out
}
