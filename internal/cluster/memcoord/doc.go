// Package memcoord is the in-process implementation of coord.Coordinator:
// a tiny revisioned key-value store with leases, shared by the nodes of one
// Cluster. It is what the single-process runtime coordinates through, and it
// lets tests run a multi-node election without etcd.
//
// Leases never expire by time; a node's lease ends when it is closed or when
// Cluster.Expire simulates the store expiring it (the node paused past its
// TTL).
package memcoord
