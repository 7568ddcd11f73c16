// Package node is the loop of one `sluice node` process in cluster mode
// (issue 19): it joins the cluster through a coord.Coordinator, campaigns,
// and while it leads runs the job's coordinator (Config.Lead); while
// another node leads it runs its share of that leader's job
// (Config.Work, for each new leader), or only waits without Work.
//
// # The loop
//
//  1. Open a session (Config.Connect) and Join with the node id; a live
//     session of an earlier process with the same id (ErrMemberExists) is
//     waited out, at most one lease TTL.
//  2. Campaign. A standby logs the current leader and waits here; with
//     Config.Work it meanwhile works for the leader (its id, term and
//     announced address), cancelled and waited for when the leader
//     changes or this node wins.
//  3. Having won: read the job's record under the new term. A job marked
//     finished (StateFinished) is not run again: the node resigns and Run
//     returns nil. Otherwise the job id (StateJobID) is read, or created
//     with a fenced write by the first leader, so that every leader of the
//     job runs it under one id (one transactional id prefix: the new
//     leader's sinks fence the old leader's producers). The restore point is
//     the published checkpoint pointer (coord.LatestCheckpoint) and nothing
//     else; without one the job starts fresh.
//  4. Config.Lead runs the job with a context that ends when the term ends:
//     the leadership's or the session's Done channel closes, or a fenced
//     write failed (Term.Lost, called by Storage). The job is then cancelled
//     at once, without a final checkpoint, and the node campaigns again —
//     with a new session if the old one ended.
//
// # Completing checkpoints
//
// Storage wraps the checkpoint storage the leader's job writes to. Its Save
// stores the snapshot and then publishes its pointer with the leader's
// fenced write; the checkpoint is complete — and its committables are
// committed by the runtime — only when both succeeded. A write refused
// because the term ended (coord.ErrFenced) fails the checkpoint and ends the
// term; one that could not reach the store (coord.ErrUnavailable) fails the
// checkpoint (the runtime carries its committables into the next one).
// Retention runs only after a publish, so the checkpoint the pointer names
// is never removed by the leader that may still be publishing.
//
// # Operations
//
// Metrics records the loop's metrics (role, term, the leader seen,
// elections, lost terms by cause, lost sessions, detected pauses, the
// latency and failures of pointer publishes); Config.Metrics passes them
// in and Term.Metrics on to Storage. Endpoint is the HTTP endpoint every
// node serves (/healthz, /readyz, /metrics, /status), standbys included;
// the leader plugs its job's handler in with SetJob. LoadTLS checks a
// node's mutual TLS files at start and gives the server and client
// configurations of node-to-node traffic (Config.TLS).
package node
