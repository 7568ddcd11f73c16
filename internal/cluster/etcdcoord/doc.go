// Package etcdcoord implements coord.Coordinator on etcd
// (go.etcd.io/etcd/client/v3): one lease per node session
// (concurrency.Session), membership keys bound to it, leader election with
// concurrency.Election, and fenced writes as etcd transactions conditioned
// on the leader key's create revision:
//
//	Txn(If(CreateRevision(leaderKey) == term)).Then(ops...)
//
// Key layout under the prefix (default "/sluice/"):
//
//	<prefix>members/<node id>        JSON coord.Member, bound to the node's lease
//	<prefix>election/<lease id hex>  node id, bound to the lease (concurrency.Election)
//	<prefix>state/<key>              coordination state, written only by fenced Txns
//
// See docs/cluster.md for the design and the fencing argument.
package etcdcoord
