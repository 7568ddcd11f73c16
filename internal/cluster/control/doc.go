// Package control carries the engine's task-host links between sluice
// nodes over gRPC: the coordinator's node (the leader) runs a [Server];
// every worker node dials it ([Dial]) and serves, on the stream it gets,
// the subtasks the coordinator places there (engine.Job.ServeTasks).
//
// One bidirectional gRPC stream per worker,
// /sluice.control.v1.Control/Link, carries the engine's frames as they are
// (package engine defines and versions them); no protobuf, no code
// generation: a bytes codec registered under the content-subtype
// "sluice-control", as internal/cluster/exchange does. The worker names
// itself in the stream's metadata ("sluice-node"). On the server each
// stream becomes an engine.Remote, and the Server is the job's
// engine.Placement: engine.Local (the leader hosts its share) first, then
// the connected workers in the order of their ids.
//
// A stream that breaks — the worker died, the connection was cut, keepalive
// pings went unanswered (WithKeepalive) — loses that Remote: its subtasks
// fail with engine.ErrHostLost and their regions restart on the hosts that
// remain. A worker that reconnects is a new host. A second stream with
// the id of a connected worker replaces it (the old one is lost).
//
// Mutual TLS: WithTLSFiles on both sides (TLS 1.3, client certificates
// required and verified against the CA; refused peers are logged).
package control
