// Package restart holds the restart strategies of a job: [None] (the
// default), [FixedDelay] and [Exponential] backoff, each with a maximum
// number of attempts. On a failure the runtime cancels every task and, if
// the strategy allows, restores the whole job from its latest completed
// checkpoint (global failover). A failure that wraps [ErrUnrecoverable]
// (a malformed record, an expression failing on a record) is never
// restarted: the job fails at once.
package restart
