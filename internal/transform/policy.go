package transform

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-io/sluice/internal/registry"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/stream"
)

// Metric names of records the policies took care of, labelled with the
// operator (the transform's name).
const (
	NumRecordsSkipped      = "numRecordsSkipped"
	NumRecordsDeadLettered = "numRecordsDeadLettered"
)

// Operator names AddWithPolicies adds besides the steps; a pipeline must
// not use them for its own operators.
const (
	RouteIn   = "errors-in"   // takes the source's records and dead letters
	RouteMain = "errors-main" // the records that go on to the sink
	RouteDead = "errors-dead" // the dead letters
)

// NeedsPolicies reports whether a pipeline needs AddWithPolicies: a step
// whose policy is not fail, or a source that sends dead letters.
func NeedsPolicies(steps []*Compiled, sourceDeadLetters bool) bool {
	if sourceDeadLetters {
		return true
	}
	for _, c := range steps {
		if c.OnError != "" && c.OnError != registry.PolicyFail {
			return true
		}
	}
	return false
}

// NeedsPositions reports whether the steps need each record's source
// position (registry.BuildContext.Positions): a step that skips records
// (logged with it), sends them as dead letters (which carry it) or fails
// the job on them (its error names it). Only steps that never fail
// (select, rename with overwrite) do without.
func NeedsPositions(steps []*Compiled) bool {
	for _, c := range steps {
		never := c.Kind == Select || c.Kind == Rebalance || (c.Kind == Rename && c.Overwrite)
		if !never || (c.OnError != "" && c.OnError != registry.PolicyFail) {
			return true
		}
	}
	return false
}

// PolicyOptions are what AddWithPolicies counts and logs with.
type PolicyOptions struct {
	Metrics *metrics.Registry // default: counted nowhere
	Logger  *slog.Logger      // default: slog.Default()
	// DeadLetters makes AddWithPolicies return the dead-letter stream
	// (default false: a pipeline without a dead-letter sink).
	DeadLetters bool
	// First are options of the first operator added (the router before
	// the steps), such as stream.StartNewChain (default none).
	First []stream.OpOption
	// Codec encodes the records of key_by and rebalance edges that cross
	// nodes (default nil: such an edge cannot cross nodes).
	Codec RecordCodec
}

// item is a record on its way through the steps: a record (r), a dead
// letter (dl), or neither (dropped: filtered out or skipped).
type item struct {
	r  Record
	ok bool // r is a record
	dl *registry.DeadLetter
	// pos is where the source read the record, if it said
	// (registry.WithPosition).
	pos registry.PosRef
	// key is the hash of the record's key, after a key_by step.
	key uint64
}

// AddWithPolicies appends the steps to a stream like AddTo, applying each
// step's OnError policy, and splits the result into the main stream and,
// if o.DeadLetters, the stream of dead letters (rendered with
// registry.DeadLetter.Record). Both come from one operator (a fan-out), so
// a dead-letter sink on the second stream takes part in the same
// checkpoints as the main sink: main output plus dead letters equal the
// input, exactly once. Dead letters that the source emits
// (registry.MarkDeadLetter) pass the steps unchanged. A record's source
// position (registry.WithPosition) is taken off it before the first step
// and named by its dead letter and skip warning.
func AddWithPolicies(in stream.DataStream[Record], steps []*Compiled, o PolicyOptions) (main, dead stream.DataStream[Record]) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := stream.Map(in, toItem, append([]stream.OpOption{stream.Name(RouteIn)}, o.First...)...)
	for _, c := range steps {
		if c.IsPartition() {
			s = c.addPartitionItems(s, o.Codec, o)
			continue
		}
		s = stream.TryMap(s, c.policyStep(o), stream.Name(c.Name))
	}
	main = stream.FlatMap(s, func(it item, emit func(Record)) {
		if it.ok {
			emit(it.r)
		}
	}, stream.Name(RouteMain))
	if o.DeadLetters {
		dead = stream.FlatMap(s, func(it item, emit func(Record)) {
			if it.dl != nil {
				emit(it.dl.Record())
			}
		}, stream.Name(RouteDead))
	}
	return main, dead
}

// policyStep returns the step as a function on items.
func (c *Compiled) policyStep(o PolicyOptions) func(item) (item, error) {
	var skipped, dead *metrics.Counter
	if o.Metrics != nil {
		g := o.Metrics.Root().With("operator", c.Name)
		skipped, dead = g.Counter(NumRecordsSkipped), g.Counter(NumRecordsDeadLettered)
	} else {
		skipped, dead = new(metrics.Counter), new(metrics.Counter)
	}
	warn := &rateLimitedLog{log: o.Logger, every: skipLogEvery}
	policy := c.OnError
	return func(it item) (item, error) {
		if !it.ok {
			return it, nil
		}
		var err error
		if c.Kind == KeyBy {
			var h uint64
			if h, err = c.Key(it.r); err == nil {
				it.key = h
				return it, nil
			}
		} else if c.Kind == Filter {
			var keep bool
			if keep, err = c.Keep(it.r); err == nil {
				if keep {
					return it, nil
				}
				return item{}, nil
			}
		} else {
			var out Record
			if out, err = c.Apply(it.r); err == nil {
				return item{r: out, ok: true, pos: it.pos}, nil
			}
		}
		switch policy {
		case registry.PolicySkip:
			skipped.Inc()
			warn.warn(c, err, it.pos)
			return item{}, nil
		case registry.PolicyDeadLetter:
			dead.Inc()
			msg := err.Error()
			if te, ok := errors.AsType[*Error](err); ok {
				msg = te.Cause()
			}
			d := &registry.DeadLetter{Error: msg, Operator: c.Name, Offset: -1, Input: deadLetterInput(it.r)}
			if te, ok := errors.AsType[*Error](err); ok && te.Input != nil {
				d.Input = te.Input
			}
			if p := it.pos.Resolve(); p != nil {
				d.Split, d.File, d.Offset = p.SplitName(), p.File, p.Offset
			}
			return item{dl: d}, nil
		}
		return item{}, withPos(err, it.pos)
	}
}

// skipLogEvery bounds the warnings about skipped records per step.
const skipLogEvery = 10 * time.Second

// rateLimitedLog logs the first skipped record at once and later ones at
// most once per every, with the number skipped in between. It is shared by
// a step's subtasks.
type rateLimitedLog struct {
	log   *slog.Logger
	every time.Duration
	mu    sync.Mutex
	last  time.Time
	n     int64
}

func (l *rateLimitedLog) warn(c *Compiled, err error, ref registry.PosRef) {
	l.mu.Lock()
	l.n++
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.mu.Unlock()
		return
	}
	n := l.n
	l.last, l.n = now, 0
	l.mu.Unlock()
	attrs := []any{"transform", c.Name, "at", c.Where, "error", err}
	if pos := ref.Resolve(); pos != nil {
		attrs = append(attrs, "split", pos.SplitName())
		if pos.File != "" {
			attrs = append(attrs, "file", pos.File)
		}
		attrs = append(attrs, "offset", pos.Offset)
	}
	l.log.Warn("skipped a record the transform failed on (on-error: skip)", append(attrs, "skipped_since_last_warning", n)...)
}

// deadLetterInput is the value a dead letter shows as its input record:
// the decoded value, decoded from the record's bytes here when the lazy
// path read only some fields (or none) of them. Only failed records pay.
func deadLetterInput(r Record) any {
	if r.Decoded() {
		return r.Value()
	}
	if d, err := r.Decode(context.Background()); err == nil {
		return d.Value()
	}
	return nil
}
