package engine

// SetBeforeTrigger installs a hook that runs on the coordinator goroutine
// right before each checkpoint's enumerator snapshots.
func SetBeforeTrigger(j *Job, fn func(id int64)) { j.beforeTrigger = fn }

// SetPlacement sets the job's Config.Placement and Config.RemoteErrors
// after it was built (tests build jobs through package stream).
func SetPlacement(j *Job, p Placement, remoteErrors ...error) {
	j.cfg.Placement = p
	j.cfg.RemoteErrors = remoteErrors
}

// Plan describes j's vertices (tasks), one line each: the head's name, the
// chained operators' uids and the parallelism.
func Plan(j *Job) []string { return j.plan() }

var HashKey = hashKey

// Units returns how many failover regions and forward chains j has.
func Units(j *Job) (regions, chains int) { return len(j.regions), len(j.chains) }
