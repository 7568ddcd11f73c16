package etcdcoord

// PauseKeepAliveForTest stops renewing the session's lease without revoking
// it, as a process paused by SIGSTOP or a long GC would: the lease expires
// in etcd after its TTL while the node, resumed, may still believe it leads.
func (c *Coordinator) PauseKeepAliveForTest() { c.sess.Orphan() }
