package engine

// Edges that cross task hosts. With a Network in its Config, a job places
// its subtasks by forward chains instead of failover regions (placement.go),
// so that a job with a rebalance or hash edge spreads over its hosts; a
// channel of such an edge between subtasks on two hosts goes through
// internal/cluster/exchange (gRPC, credit-based flow control, events in
// line), one in a process stays a Go channel.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/sluice-io/sluice/internal/cluster/exchange"
	"github.com/sluice-io/sluice/restart"
)

// ErrEdgeBroken is wrapped by the error of a subtask whose channel to or
// from a subtask on another task host broke (the peer failed, was cancelled
// or its host was lost). Like any task failure it fails the subtask's
// region; a job with an edge that crosses hosts is one failover region, so
// the job restarts from its latest completed checkpoint.
var ErrEdgeBroken = errors.New("a channel of an edge between task hosts broke")

// Network carries the records of edges whose subtasks run on different
// task hosts: an exchange server that receives this process's inputs, the
// address the other hosts reach it at, and one client per peer address.
// Give the coordinator's job and every task host's job (ServeTasks) one
// (Config.Network). It is safe for concurrent use; Close it after the jobs
// that use it ended.
type Network struct {
	// Server receives the channels whose consumer runs in this process.
	Server *exchange.Server
	// Addr is the host:port at which the other task hosts reach Server.
	Addr string
	// ClientOptions are the options of the clients to other hosts
	// (exchange.WithTLSFiles, exchange.WithKeepalive, …).
	ClientOptions []exchange.Option

	mu      sync.Mutex
	clients map[string]*exchange.Client
	stop    func()

	received atomic.Int64
}

// RecordsReceived returns how many records this process's subtasks
// received from subtasks on other hosts.
func (n *Network) RecordsReceived() int64 { return n.received.Load() }

// ListenNetwork starts an exchange server on listen (host:port; port 0
// picks one) and returns its Network. advertise is the address other hosts
// dial ("" = the listener's address). opts are the server's and the
// clients' exchange options (TLS files, keepalive, logger).
func ListenNetwork(listen, advertise string, opts ...exchange.Option) (*Network, error) {
	srv, err := exchange.NewServer(opts...)
	if err != nil {
		return nil, fmt.Errorf("record exchange: %w", err)
	}
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("record exchange: listen on %s: %w", listen, err)
	}
	if advertise == "" {
		advertise = lis.Addr().String()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	n := &Network{Server: srv, Addr: advertise, ClientOptions: opts}
	n.stop = func() {
		srv.Stop()
		<-done
	}
	return n, nil
}

// client returns the (shared) client for the host at addr.
func (n *Network) client(addr string) (*exchange.Client, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if c := n.clients[addr]; c != nil {
		return c, nil
	}
	c, err := exchange.Dial(addr, n.ClientOptions...)
	if err != nil {
		return nil, err
	}
	if n.clients == nil {
		n.clients = map[string]*exchange.Client{}
	}
	n.clients[addr] = c
	return c, nil
}

// Close closes the clients and, for a Network of ListenNetwork, stops the
// server.
func (n *Network) Close() error {
	n.mu.Lock()
	cs := n.clients
	n.clients = nil
	n.mu.Unlock()
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	if n.stop != nil {
		n.stop()
	}
	return errors.Join(errs...)
}

// routes says, for one attempt's build of subtasks on one host, where every
// subtask of the job runs: hostOf[vertex index][subtask] indexes addrs, the
// exchange address of each host; self is the building host's index. A nil
// *routes means every channel is in process.
type routes struct {
	self   int
	addrs  []string
	hostOf [][]int
	net    *Network
	job    string // the channel ids' job: see channelJob
}

// channelJob is the Job of a job's channel ids: its name and run id, so
// that a sender of another run (a former leader's) never feeds this one.
func channelJob(j *Job) string { return j.name + "@" + j.runID }

// peer returns the exchange address of subtask i of v if it runs on
// another host, or "".
func (rt *routes) peer(v int, i int) string {
	if rt == nil {
		return ""
	}
	if h := rt.hostOf[v][i]; h != rt.self {
		return rt.addrs[h]
	}
	return ""
}

// edgeLinks is what an edge's output or gate needs to reach peers on other
// hosts: peers[i] is the address of the receiver (output) or sender (gate)
// i, "" for one in this process.
type edgeLinks struct {
	rt    *routes
	name  string // "<from vertex>-><to vertex>"
	codec any    // exchange.Codec[T]
	peers []string
	srcs  []int // gate: the sender subtask of each input
}

func (l *edgeLinks) remote() bool {
	if l == nil {
		return false
	}
	for _, p := range l.peers {
		if p != "" {
			return true
		}
	}
	return false
}

func (l *edgeLinks) channel(src, dst int) exchange.ChannelID {
	return exchange.ChannelID{Job: l.rt.job, Edge: l.name, Src: src, Dst: dst}
}

// elemCodec frames a record with its timestamp for the wire.
type elemCodec[T any] struct{ c exchange.Codec[T] }

func (e elemCodec[T]) Append(dst []byte, v elem[T]) ([]byte, error) {
	dst = binary.AppendVarint(dst, v.ts)
	return e.c.Append(dst, v.v)
}

func (e elemCodec[T]) Decode(b []byte) (elem[T], error) {
	ts, n := binary.Varint(b)
	if n <= 0 {
		return elem[T]{}, errors.New("record timestamp: bad varint")
	}
	v, err := e.c.Decode(b[n:])
	if err != nil {
		return elem[T]{}, err
	}
	return elem[T]{v: v, ts: ts}, nil
}

// errNoEdgeCodec fails the placement of a job whose edge crosses hosts
// without a record codec.
var errNoEdgeCodec = errors.New("the edge crosses task hosts but has no record codec")

// checkCodecs fails (unrecoverably: a restart would place it the same way)
// when an edge whose subtasks the placement puts on several hosts has no
// codec.
func (a *attempt) checkCodecs() error {
	var errs []error
	for _, v := range a.job.vertices {
		for _, e := range v.outputs {
			if e.codec != nil || !a.edgeCrosses(v, e) {
				continue
			}
			errs = append(errs, fmt.Errorf("%w: %w: edge %s -> %s (%s) runs between subtasks on different task hosts, so its records must be encoded: give it a codec (stream.WithCodec on the KeyBy or Rebalance, or exchange.FromVersioned of a serde.Versioned), or run the job without a Network",
				ErrInvalidJob, errNoEdgeCodec, e.from.name, e.to.name, e.part))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", restart.ErrUnrecoverable, err)
	}
	return nil
}

// edgeCrosses reports whether a channel of e (out of v) joins subtasks on
// two hosts under the attempt's placement.
func (a *attempt) edgeCrosses(v *vertex, e *edge) bool {
	w := a.vertexOfHead(e.to)
	for s := range v.parallelism {
		hs := a.pl.hostOfTask(taskKey{v.id, s})
		for d := range w.parallelism {
			if e.part == Forward && s != d {
				continue
			}
			if a.pl.hostOfTask(taskKey{w.id, d}) != hs {
				return true
			}
		}
	}
	return false
}

func (a *attempt) vertexOfHead(n *Node) *vertex {
	for _, v := range a.job.vertices {
		if v.head() == n {
			return v
		}
	}
	return nil
}

// routesFor returns the routes of a build on host self under the attempt's
// current placement, or nil when the job has no Network.
func (a *attempt) routesFor(self string) (*routes, error) {
	j := a.job
	if !a.pl.chains {
		return nil, nil
	}
	rt := &routes{net: j.cfg.Network, job: channelJob(j)}
	index := map[string]int{}
	for _, h := range a.pl.hostOf {
		if _, ok := index[h.ID()]; ok {
			continue
		}
		index[h.ID()] = len(rt.addrs)
		rt.addrs = append(rt.addrs, h.exchangeAddr(j))
	}
	idx, ok := index[self]
	if !ok {
		return nil, nil // no subtask of the job on self: nothing to route
	}
	rt.self = idx
	for _, v := range j.vertices {
		hs := make([]int, v.parallelism)
		for i := range hs {
			h := a.pl.hostOfTask(taskKey{v.id, i})
			hs[i] = index[h.ID()]
			if h.ID() != self && rt.addrs[hs[i]] == "" {
				return nil, fmt.Errorf("task host %s has no record exchange address (its node runs without a Network), but subtask %d of %s is placed there", h.ID(), i, v.id)
			}
		}
		rt.hostOf = append(rt.hostOf, hs)
	}
	return rt, nil
}

// linksOf returns the links of edge e out of subtask src of v (output) or,
// with gate, into subtask src (read: dst) of the edge's receiver. nil when
// every channel of it is in process.
func (rt *routes) links(vs []*vertex, e *edge, sub int, gate bool) *edgeLinks {
	if rt == nil {
		return nil
	}
	var from, to int = -1, -1
	for i, v := range vs {
		if v.tail() == e.from {
			from = i
		}
		if v.head() == e.to {
			to = i
		}
	}
	l := &edgeLinks{rt: rt, name: vs[from].id + "->" + vs[to].id, codec: e.codec}
	if gate {
		for s := range vs[from].parallelism {
			if e.part == Forward && s != sub {
				continue
			}
			l.peers = append(l.peers, rt.peer(from, s))
			l.srcs = append(l.srcs, s)
		}
	} else {
		for d := range vs[to].parallelism {
			if e.part == Forward && d != sub {
				l.peers = append(l.peers, "")
				continue
			}
			l.peers = append(l.peers, rt.peer(to, d))
		}
	}
	if !l.remote() {
		return nil
	}
	return l
}

// openCtx is a context that is already done: closing a sender with it
// aborts its stream at once.
func cancelledCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
