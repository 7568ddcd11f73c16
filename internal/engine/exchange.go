package engine

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"github.com/sluice-io/sluice/internal/cluster/exchange"
	"github.com/sluice-io/sluice/watermark"
)

// Collector receives batches of records on a task goroutine. Chained
// operators are collectors that process a batch and hand their own output
// batch to the next collector: a tight loop per operator instead of a chain
// of calls per record. A collector must not modify or keep recs after it
// returns.
type Collector[T any] interface {
	Collect(recs []elem[T])
}

// elem is a record with its event timestamp (or watermark.NoTimestamp).
type elem[T any] struct {
	v  T
	ts int64
}

type msgKind uint8

const (
	msgData msgKind = iota
	msgWatermark
	msgIdle
	msgBarrier
	msgEnd
)

// netMsg travels on a channel between two subtasks. Data travels in
// batches; control messages are in line with data, so a barrier or a
// watermark is never overtaken by records sent before it.
type netMsg[T any] struct {
	kind  msgKind
	recs  *[]elem[T]
	value int64 // watermark or checkpoint id
}

// Partitioning says how records are spread over the subtasks of the
// receiving operator.
type Partitioning int

const (
	// Forward sends subtask i's records to subtask i (same parallelism).
	Forward Partitioning = iota
	// Rebalance spreads records round-robin over all receivers.
	Rebalance
	// Hash sends every record with the same key to the same receiver.
	Hash
)

func (p Partitioning) String() string {
	return [...]string{"forward", "rebalance", "hash"}[p]
}

// edgeChannels is one attempt's channels of one edge: ch[src][dst].
type edgeChannels[T any] struct {
	ch     [][]chan netMsg[T]
	notify []chan struct{} // per receiver: a token after each send
	pool   *sync.Pool
}

func newEdgeChannels[T any](srcPar, dstPar int, forward bool, capacity int) *edgeChannels[T] {
	e := &edgeChannels[T]{
		ch:     make([][]chan netMsg[T], srcPar),
		notify: make([]chan struct{}, dstPar),
		pool:   &sync.Pool{},
	}
	for d := range dstPar {
		e.notify[d] = make(chan struct{}, 1)
	}
	for s := range srcPar {
		e.ch[s] = make([]chan netMsg[T], dstPar)
		for d := range dstPar {
			if forward && s != d {
				continue
			}
			e.ch[s][d] = make(chan netMsg[T], capacity)
		}
	}
	return e
}

// inputs returns receiver d's channels, in sender order.
func (e *edgeChannels[T]) inputs(d int) []chan netMsg[T] {
	var out []chan netMsg[T]
	for s := range e.ch {
		if c := e.ch[s][d]; c != nil {
			out = append(out, c)
		}
	}
	return out
}

// netOutput is the tail of a chain that feeds an edge: it buffers records
// per receiver and sends full batches. Sends block when the receiver's
// channel is full (backpressure), but give up when ctx is cancelled.
type netOutput[T any] struct {
	ctx       context.Context
	chans     []chan netMsg[T] // by receiver; nil entries are skipped
	notify    []chan struct{}
	bufs      []*[]elem[T]
	pool      *sync.Pool
	batchSize int
	part      Partitioning
	self      int
	rr        int
	hash      func(T) uint64
	out       int64 // records sent, flushed to metrics by the task
	fail      func(error)
	// links and senders: the receivers on other task hosts (senders[i]
	// set for them once open; chans[i] is then unused).
	links   *edgeLinks
	epoch   exchange.Epoch
	senders []*exchange.Sender[elem[T]]
}

func newNetOutput[T any](ctx context.Context, e *edgeChannels[T], src int, part Partitioning, hash func(T) uint64, batchSize int, fail func(error)) *netOutput[T] {
	o := &netOutput[T]{
		ctx: ctx, chans: e.ch[src], notify: e.notify, pool: e.pool,
		batchSize: batchSize, part: part, self: src, hash: hash, fail: fail,
		bufs: make([]*[]elem[T], len(e.ch[src])),
		rr:   src % max(1, len(e.ch[src])),
	}
	for i := range o.bufs {
		if o.chans[i] != nil {
			o.bufs[i] = o.newBatch()
		}
	}
	return o
}

func (o *netOutput[T]) newBatch() *[]elem[T] {
	if b, ok := o.pool.Get().(*[]elem[T]); ok {
		*b = (*b)[:0]
		return b
	}
	s := make([]elem[T], 0, o.batchSize)
	return &s
}

func (o *netOutput[T]) Collect(recs []elem[T]) {
	switch o.part {
	case Forward:
		o.append(o.self, recs)
	case Rebalance:
		n := len(o.bufs)
		for len(recs) > 0 && n > 1 {
			// Round-robin per record, done as runs into each receiver's
			// batch to keep the loop tight.
			b := o.bufs[o.rr]
			*b = append(*b, recs[0])
			recs = recs[1:]
			if len(*b) >= o.batchSize {
				o.sendBatch(o.rr)
			}
			o.rr++
			if o.rr == n {
				o.rr = 0
			}
		}
		if n == 1 {
			o.append(0, recs)
		}
	case Hash:
		n := uint64(len(o.bufs))
		for _, r := range recs {
			i := int(o.hash(r.v) % n)
			b := o.bufs[i]
			*b = append(*b, r)
			if len(*b) >= o.batchSize {
				o.sendBatch(i)
			}
		}
	}
}

// append copies recs into receiver i's batches.
func (o *netOutput[T]) append(i int, recs []elem[T]) {
	for len(recs) > 0 {
		b := o.bufs[i]
		k := min(len(recs), o.batchSize-len(*b))
		*b = append(*b, recs[:k]...)
		recs = recs[k:]
		if len(*b) >= o.batchSize {
			o.sendBatch(i)
		}
	}
}

func (o *netOutput[T]) sendBatch(i int) {
	b := o.bufs[i]
	if len(*b) == 0 {
		return
	}
	o.out += int64(len(*b))
	o.bufs[i] = o.newBatch()
	o.send(i, netMsg[T]{kind: msgData, recs: b})
}

func (o *netOutput[T]) send(i int, m netMsg[T]) {
	if o.links != nil && o.links.peers[i] != "" {
		o.sendRemote(i, m)
		return
	}
	select {
	case o.chans[i] <- m:
	default:
		select {
		case o.chans[i] <- m:
		case <-o.ctx.Done():
			o.fail(o.ctx.Err())
			return
		}
	}
	select {
	case o.notify[i] <- struct{}{}:
	default:
	}
}

// sendRemote sends m to receiver i on another host. A failure fails the
// task (wrapping ErrEdgeBroken unless the task was cancelled).
func (o *netOutput[T]) sendRemote(i int, m netMsg[T]) {
	s := o.senders[i]
	if s == nil {
		o.fail(fmt.Errorf("%w: %v: not open", ErrEdgeBroken, o.links.channel(o.self, i)))
		return
	}
	var err error
	switch m.kind {
	case msgData:
		err = s.SendBatch(o.ctx, *m.recs)
		clear(*m.recs)
		o.pool.Put(m.recs)
	case msgWatermark:
		err = s.SendEvent(o.ctx, exchange.Watermark(m.value))
	case msgIdle:
		err = s.SendEvent(o.ctx, exchange.Idle())
	case msgBarrier:
		err = s.SendEvent(o.ctx, exchange.Barrier(m.value))
	case msgEnd:
		err = s.SendEvent(o.ctx, exchange.EndOfPartition())
	}
	if err != nil {
		if o.ctx.Err() != nil {
			o.fail(o.ctx.Err())
			return
		}
		o.fail(fmt.Errorf("%w: %w", ErrEdgeBroken, err))
	}
}

// edgeCodec returns the codec of l's channels for records of type T: nil
// when the edge has none, an error naming the edge when its codec encodes
// another type (Graph.SetEdgeCodec refuses one; this keeps a wrong one
// from turning into a channel without a codec).
func edgeCodec[T any](l *edgeLinks) (exchange.Codec[elem[T]], error) {
	if l.codec == nil {
		return nil, nil
	}
	codec, ok := l.codec.(exchange.Codec[T])
	if !ok {
		return nil, fmt.Errorf("%w: edge %s: its codec %T does not encode its records (%v)", ErrInvalidJob, l.name, l.codec, reflect.TypeFor[T]())
	}
	return elemCodec[T]{codec}, nil
}

// open opens the channels to receivers on other hosts (it waits for each
// to accept).
func (o *netOutput[T]) open(ctx context.Context) error {
	if o.links == nil {
		return nil
	}
	c, err := edgeCodec[T](o.links)
	if err != nil {
		return err
	}
	for i, addr := range o.links.peers {
		if addr == "" || o.senders[i] != nil {
			continue
		}
		cl, err := o.links.rt.net.client(addr)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrEdgeBroken, err)
		}
		s, err := exchange.Open(ctx, cl, o.links.channel(o.self, i), o.epoch, c)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: %w", ErrEdgeBroken, err)
		}
		o.senders[i] = s
	}
	return nil
}

// close aborts the channels to other hosts: whatever they still queue is
// of no use once the task ended (a finished job's data all arrived before
// its final barrier was aligned).
func (o *netOutput[T]) close() {
	for i, s := range o.senders {
		if s != nil {
			_ = s.Close(cancelledCtx())
			o.senders[i] = nil
		}
	}
}

// flush sends every partial batch.
func (o *netOutput[T]) flush() {
	for i := range o.bufs {
		if o.chans[i] != nil {
			o.sendBatch(i)
		}
	}
}

// broadcast flushes, then sends a control message to every receiver.
func (o *netOutput[T]) broadcast(kind msgKind, value int64) {
	o.flush()
	for i := range o.chans {
		if o.chans[i] != nil {
			o.send(i, netMsg[T]{kind: kind, value: value})
		}
	}
}

// gate is the head of a chain fed by an edge: it reads the channels of all
// senders, aligns checkpoint barriers and combines watermarks.
type gate[T any] struct {
	chans    []chan netMsg[T]
	notify   chan struct{}
	pool     *sync.Pool
	next     Collector[T]
	blocked  []bool
	ended    []bool
	nEnded   int
	aligning int64 // checkpoint being aligned, 0 if none
	nBlocked int
	lastDone int64 // highest checkpoint id aligned or aborted
	wms      *watermark.Combiner[int]
	rr       int
	in       int64 // records received
	// remote[i] is the receiver of input i when its sender runs on
	// another task host (chans[i] is then unused); dead[i] marks one
	// that ended after its end of input.
	remote []*exchange.Receiver[elem[T]]
	dead   []bool
	net    *Network
}

func newGate[T any](e *edgeChannels[T], d int) *gate[T] {
	g := &gate[T]{chans: e.inputs(d), notify: e.notify[d], pool: e.pool, wms: watermark.NewCombiner[int]()}
	g.blocked = make([]bool, len(g.chans))
	g.ended = make([]bool, len(g.chans))
	for i := range g.chans {
		g.wms.Add(i)
	}
	return g
}

// listen registers the receivers of the gate's inputs on other hosts.
// links.peers is by input, in sender order.
func (g *gate[T]) listen(l *edgeLinks, d int, ep exchange.Epoch) error {
	if l == nil {
		return nil
	}
	c, err := edgeCodec[T](l)
	if err != nil {
		return err
	}
	g.net = l.rt.net
	g.remote = make([]*exchange.Receiver[elem[T]], len(g.chans))
	g.dead = make([]bool, len(g.chans))
	srcs := l.srcs
	for i, addr := range l.peers {
		if addr == "" {
			continue
		}
		r, err := exchange.Listen(l.rt.net.Server, l.channel(srcs[i], d), ep, c, exchange.WithReady(g.notify))
		if err != nil {
			g.close()
			return fmt.Errorf("%w: %w", ErrEdgeBroken, err)
		}
		g.remote[i] = r
	}
	return nil
}

// close unregisters the gate's receivers (their senders fail).
func (g *gate[T]) close() {
	for i, r := range g.remote {
		if r != nil {
			_ = r.Close()
			g.remote[i] = nil
		}
	}
}

// fromExchange converts a received message to the gate's form.
func fromExchange[T any](m exchange.Message[elem[T]]) netMsg[T] {
	switch m.Kind {
	case exchange.KindRecords:
		recs := m.Records
		return netMsg[T]{kind: msgData, recs: &recs}
	case exchange.KindWatermark:
		return netMsg[T]{kind: msgWatermark, value: m.Value}
	case exchange.KindIdle:
		return netMsg[T]{kind: msgIdle}
	case exchange.KindBarrier:
		return netMsg[T]{kind: msgBarrier, value: m.Value}
	}
	return netMsg[T]{kind: msgEnd}
}

// gateEvents is what a gate asks of its task.
type gateEvents interface {
	emitWatermark(wm int64)
	markIdle()
	barrier(id int64) error
	endOfInput() error
}

// poll handles at most one message without blocking and reports whether it
// found one.
func (g *gate[T]) poll(t gateEvents) (bool, error) {
	n := len(g.chans)
	for k := 0; k < n; k++ {
		i := g.rr
		g.rr++
		if g.rr == n {
			g.rr = 0
		}
		if g.blocked[i] {
			continue // aligning: hold this input until the barrier is on all
		}
		// Ended inputs are still read: their senders stay alive after the
		// end of input and forward the barriers of later checkpoints.
		if g.remote != nil && g.remote[i] != nil {
			if g.dead[i] {
				continue
			}
			m, ok, err := g.remote[i].Poll()
			if err != nil {
				if g.ended[i] {
					// Its sender ended after its end of input (the
					// job is finishing): nothing more can come.
					g.dead[i] = true
					continue
				}
				return false, fmt.Errorf("%w: input %d: %w", ErrEdgeBroken, i, err)
			}
			if !ok {
				continue
			}
			g.net.received.Add(int64(len(m.Records)))
			return true, g.handle(t, i, fromExchange(m))
		}
		select {
		case m := <-g.chans[i]:
			return true, g.handle(t, i, m)
		default:
		}
	}
	return false, nil
}

func (g *gate[T]) handle(t gateEvents, i int, m netMsg[T]) error {
	switch m.kind {
	case msgData:
		recs := *m.recs
		g.next.Collect(recs)
		g.in += int64(len(recs))
		clear(recs)
		g.pool.Put(m.recs)
	case msgWatermark:
		g.wms.Update(i, m.value)
		g.advance(t)
	case msgIdle:
		g.wms.MarkIdle(i)
		g.advance(t)
	case msgBarrier:
		return g.onBarrier(t, i, m.value)
	case msgEnd:
		if g.ended[i] {
			return nil
		}
		g.ended[i] = true
		g.nEnded++
		g.wms.Remove(i)
		g.advance(t)
		if g.nEnded == len(g.chans) {
			return t.endOfInput()
		}
	}
	return nil
}

func (g *gate[T]) advance(t gateEvents) {
	wm, advanced, allIdle := g.wms.Advance()
	if advanced {
		t.emitWatermark(wm)
	} else if allIdle {
		t.markIdle()
	}
}

func (g *gate[T]) onBarrier(t gateEvents, i int, id int64) error {
	if id <= g.lastDone {
		return nil // a barrier of an aborted or subsumed checkpoint
	}
	if id > g.aligning {
		g.release() // a newer checkpoint cancels an unfinished alignment
		g.aligning = id
	}
	g.blocked[i] = true
	g.nBlocked++
	if g.nBlocked < len(g.chans) {
		return nil
	}
	g.release()
	g.lastDone = id
	return t.barrier(id)
}

// abort releases an alignment of checkpoint id (aborted by the coordinator).
func (g *gate[T]) abort(id int64) {
	if id >= g.aligning && g.aligning != 0 {
		g.release()
	}
	if id > g.lastDone {
		g.lastDone = id
	}
}

func (g *gate[T]) release() {
	clear(g.blocked)
	g.nBlocked = 0
	g.aligning = 0
}
