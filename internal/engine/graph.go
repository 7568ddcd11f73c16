package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sluice-io/sluice/internal/cluster/exchange"
)

// ErrInvalidJob is wrapped by every error that rejects a job definition
// before it starts.
var ErrInvalidJob = errors.New("invalid job")

type nodeKind int

const (
	kindSource nodeKind = iota
	kindOperator
	kindSink
)

// Node is one logical operator of a job graph. Nodes are made by the
// package-level constructors (SourceNode, MapNode, …), which capture the
// record types; the runtime itself never sees a record type.
type Node struct {
	id          int
	name        string
	uid         string // "" = name
	kind        nodeKind
	parallelism int
	inputs      []*edge
	outputs     []*edge
	out         port // values this node emits (nil for sinks)
	noChain     bool
	newChain    bool // the node starts a chain: it does not chain with its input

	// exactly one of these is set, per kind
	src sourceFactory
	// op returns a Collector[In] feeding next (a Collector[Out]); fail
	// fails the task with an error from a user function.
	op   func(next any, fail func(error)) (any, error)
	sink sinkFactory
}

// Name is the node's name, unique in its graph. It labels metrics and
// logs.
func (n *Node) Name() string { return n.name }

// UID is the node's stable id, Flink's uid: checkpoint state is stored and
// restored under it. It defaults to the name, so checkpoints written before
// uids existed (keyed by name) restore unchanged.
func (n *Node) UID() string {
	if n.uid != "" {
		return n.uid
	}
	return n.name
}

// SetUID sets the node's uid; "" restores the default (the name). With a
// fixed uid the name may change between versions of a job without losing
// the operator's state.
func (n *Node) SetUID(uid string) { n.uid = uid }

// SetParallelism sets the node's parallelism; 0 means the job default.
func (n *Node) SetParallelism(p int) { n.parallelism = p }

// DisableChaining keeps the node in a task of its own.
func (n *Node) DisableChaining() { n.noChain = true }

// StartNewChain starts a new chain at the node, Flink's startNewChain: it
// does not chain with its input (it runs in another task, fed through a
// bounded channel of batches), but the operators after it may chain with
// it.
func (n *Node) StartNewChain() { n.newChain = true }

type edge struct {
	from, to *Node
	part     Partitioning
	explicit bool // set by the user: never chain across it
	hash     any  // func(T) uint64 for Hash
	codec    any  // exchange.Codec[T] for channels between task hosts, or nil
}

// Graph is a job under construction. It is not safe for concurrent use.
type Graph struct {
	nodes []*Node
	names map[string]int
	errs  []error
}

// NewGraph returns an empty graph.
func NewGraph() *Graph { return &Graph{names: map[string]int{}} }

func (g *Graph) add(n *Node) *Node {
	n.id = len(g.nodes)
	if n.name == "" {
		n.name = fmt.Sprintf("%s-%d", [...]string{"source", "operator", "sink"}[n.kind], n.id)
	}
	if g.names[n.name] > 0 {
		g.errs = append(g.errs, fmt.Errorf("%w: two operators are named %q; names must be unique (they key checkpoint state)", ErrInvalidJob, n.name))
	}
	g.names[n.name]++
	g.nodes = append(g.nodes, n)
	return n
}

// Connect adds an edge from one node to another. hash is a func(T) uint64
// for Hash partitioning, else nil.
func (g *Graph) Connect(from, to *Node, part Partitioning, explicit bool, hash any) {
	e := &edge{from: from, to: to, part: part, explicit: explicit, hash: hash}
	from.outputs = append(from.outputs, e)
	to.inputs = append(to.inputs, e)
}

// SetEdgeCodec sets the record codec (an exchange.Codec[T] of the edge's
// record type) of the edge from one node to another, needed when the job
// places the edge's subtasks on different task hosts (Config.Network). It
// returns an error wrapping ErrInvalidJob if there is no such edge or the
// codec is of another type.
func (g *Graph) SetEdgeCodec(from, to *Node, codec any) error {
	for _, e := range from.outputs {
		if e.to != to {
			continue
		}
		if codec != nil && !from.out.codecFits(codec) {
			return fmt.Errorf("%w: the codec %T of edge %s -> %s does not encode its record type", ErrInvalidJob, codec, from.name, to.name)
		}
		e.codec = codec
		return nil
	}
	return fmt.Errorf("%w: no edge %s -> %s", ErrInvalidJob, from.name, to.name)
}

// vertex is a chain of nodes that runs in one task per subtask.
type vertex struct {
	id          string
	nodes       []*Node
	parallelism int
	inputs      []*edge // network edges into the head
	outputs     []*edge // network edges out of the tail
}

func (v *vertex) head() *Node { return v.nodes[0] }
func (v *vertex) tail() *Node { return v.nodes[len(v.nodes)-1] }

func (v *vertex) describe() string {
	names := make([]string, len(v.nodes))
	for i, n := range v.nodes {
		names[i] = n.name
	}
	return strings.Join(names, " -> ")
}

// plan validates the graph and chains its nodes into vertices.
func (g *Graph) plan(defaultParallelism int, chaining bool) ([]*vertex, error) {
	errs := append([]error(nil), g.errs...)
	if defaultParallelism < 1 {
		errs = append(errs, fmt.Errorf("%w: job parallelism is %d; it must be at least 1", ErrInvalidJob, defaultParallelism))
	}
	var sources, sinks int
	uids := map[string]*Node{}
	for _, n := range g.nodes {
		if o := uids[n.UID()]; o != nil && (o.uid != "" || n.uid != "") {
			errs = append(errs, fmt.Errorf("%w: operators %q and %q have the same uid %q; uids must be unique (they key checkpoint state)", ErrInvalidJob, o.name, n.name, n.UID()))
		}
		uids[n.UID()] = n
		if n.parallelism == 0 {
			n.parallelism = defaultParallelism
		}
		if n.parallelism < 1 {
			errs = append(errs, fmt.Errorf("%w: operator %q has parallelism %d; it must be at least 1", ErrInvalidJob, n.name, n.parallelism))
		}
		switch n.kind {
		case kindSource:
			sources++
			if err := n.src.validate(); err != nil {
				errs = append(errs, fmt.Errorf("%w: source %q: %w", ErrInvalidJob, n.name, err))
			}
		case kindSink:
			sinks++
			if len(n.outputs) > 0 {
				errs = append(errs, fmt.Errorf("%w: sink %q cannot have outputs", ErrInvalidJob, n.name))
			}
		}
		if n.kind != kindSource && len(n.inputs) == 0 {
			errs = append(errs, fmt.Errorf("%w: operator %q has no input", ErrInvalidJob, n.name))
		}
		if len(n.inputs) > 1 {
			errs = append(errs, fmt.Errorf("%w: operator %q has %d inputs; only one is supported", ErrInvalidJob, n.name, len(n.inputs)))
		}
		if n.kind != kindSink && len(n.outputs) == 0 {
			errs = append(errs, fmt.Errorf("%w: the output of %q goes nowhere; add a sink (stream.SinkTo) or remove it", ErrInvalidJob, n.name))
		}
	}
	if sources == 0 {
		errs = append(errs, fmt.Errorf("%w: the job has no source; start it with stream.FromSource", ErrInvalidJob))
	}
	if sinks == 0 {
		errs = append(errs, fmt.Errorf("%w: the job has no sink; end it with stream.SinkTo", ErrInvalidJob))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, n := range g.nodes {
		for _, e := range n.outputs {
			if e.part == Forward && e.from.parallelism != e.to.parallelism {
				e.part = Rebalance
			}
		}
	}
	chained := func(n *Node) bool {
		if !chaining || n.kind == kindSource || n.noChain || n.newChain || len(n.inputs) != 1 {
			return false
		}
		e := n.inputs[0]
		return e.part == Forward && !e.explicit && len(e.from.outputs) == 1 &&
			e.from.parallelism == n.parallelism && !e.from.noChain
	}
	var vs []*vertex
	for _, n := range g.nodes { // nodes are in creation order: inputs come first
		if chained(n) {
			continue
		}
		v := &vertex{nodes: []*Node{n}, parallelism: n.parallelism, inputs: n.inputs}
		for cur := n; len(cur.outputs) == 1 && chained(cur.outputs[0].to); {
			cur = cur.outputs[0].to
			v.nodes = append(v.nodes, cur)
		}
		v.outputs = v.tail().outputs
		v.id = v.head().name
		vs = append(vs, v)
	}
	return vs, nil
}

// port creates the typed plumbing for values of one type.
type port interface {
	newChannels(srcPar, dstPar int, forward bool, capacity int) any
	newOutput(ctx context.Context, ch any, src int, part Partitioning, hash any, batch int, fail func(error), links *edgeLinks, ep exchange.Epoch) (Collector any, out outputTail)
	newGate(ch any, d int, links *edgeLinks, ep exchange.Epoch) (g inputGate, setNext func(next any) error, err error)
	fanout(cs []any) any
	codecFits(codec any) bool
}

// outputTail is the erased side of a netOutput.
type outputTail interface {
	flush()
	broadcast(kind msgKind, value int64)
	recordsOut() int64
	open(ctx context.Context) error
	close()
}

// inputGate is the erased side of a gate.
type inputGate interface {
	poll(t gateEvents) (bool, error)
	ready() <-chan struct{}
	abort(id int64)
	recordsIn() int64
	close()
}

func (o *netOutput[T]) recordsOut() int64 { return o.out }
func (g *gate[T]) ready() <-chan struct{} { return g.notify }
func (g *gate[T]) recordsIn() int64       { return g.in }
func (g *gate[T]) setNext(next any) error { return setCollector(&g.next, next) }

type typedPort[T any] struct{}

func (typedPort[T]) newChannels(srcPar, dstPar int, forward bool, capacity int) any {
	return newEdgeChannels[T](srcPar, dstPar, forward, capacity)
}

func (typedPort[T]) newOutput(ctx context.Context, ch any, src int, part Partitioning, hash any, batch int, fail func(error), links *edgeLinks, ep exchange.Epoch) (any, outputTail) {
	var h func(T) uint64
	if hash != nil {
		h = hash.(func(T) uint64)
	}
	o := newNetOutput(ctx, ch.(*edgeChannels[T]), src, part, h, batch, fail)
	if links != nil {
		o.links, o.epoch = links, ep
		o.senders = make([]*exchange.Sender[elem[T]], len(o.chans))
	}
	return Collector[T](o), o
}

func (typedPort[T]) newGate(ch any, d int, links *edgeLinks, ep exchange.Epoch) (inputGate, func(any) error, error) {
	g := newGate(ch.(*edgeChannels[T]), d)
	if err := g.listen(links, d, ep); err != nil {
		return nil, nil, err
	}
	return g, g.setNext, nil
}

func (typedPort[T]) codecFits(codec any) bool {
	_, ok := codec.(exchange.Codec[T])
	return ok
}

func (typedPort[T]) fanout(cs []any) any {
	if len(cs) == 1 {
		return cs[0]
	}
	f := make(tee[T], len(cs))
	for i, c := range cs {
		f[i] = c.(Collector[T])
	}
	return Collector[T](f)
}

type tee[T any] []Collector[T]

func (t tee[T]) Collect(recs []elem[T]) {
	for _, c := range t {
		c.Collect(recs)
	}
}

func setCollector[T any](dst *Collector[T], next any) error {
	c, ok := next.(Collector[T])
	if !ok {
		var zero T
		return fmt.Errorf("internal: operator input of type %T cannot take %T", zero, next)
	}
	*dst = c
	return nil
}
