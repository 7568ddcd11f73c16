// Package coord defines what a sluice node needs from cluster coordination,
// independent of the store behind it: membership held by a lease, leader
// election, and fenced writes of the coordination state (the pointer to the
// latest completed checkpoint, split assignments, commit records).
//
// Two implementations exist: internal/cluster/etcdcoord (etcd, for a job
// spread over several `sluice node` processes) and internal/cluster/memcoord
// (in process, for the single-process runtime and tests). Both pass the
// conformance suite in internal/cluster/coord/coordtest.
//
// # Fencing
//
// A node that wins an election holds a [Leadership] whose [Leadership.Term]
// is the store revision at which its leadership key was created. Every write
// through [Leadership.Apply] is one atomic transaction conditioned on that
// key still existing with that creation revision. A leader whose lease ended
// (it was paused past the lease TTL, partitioned, or its session was closed)
// has lost the key; a successor can only win after that key is gone, so
// after the successor's election every write of the old leader is refused
// with [ErrFenced], whatever the old leader believes. Reads need no
// leadership.
//
// The package depends on the standard library only.
package coord
