package engine

// SetBeforeTrigger installs a hook that runs on the coordinator goroutine
// right before each checkpoint's enumerator snapshots.
func SetBeforeTrigger(j *Job, fn func(id int64)) { j.beforeTrigger = fn }
