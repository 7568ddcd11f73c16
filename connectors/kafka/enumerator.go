package kafka

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/source"
)

// enumerator discovers partitions and pushes each to its owner reader:
// owner = (hash(topic) + partition) % parallelism, so a topic's partitions
// spread evenly. Discovery and offset lookups run in CallAsync; the
// enumerator's own methods never block.
type enumerator struct {
	ctx source.EnumeratorContext[Split]
	cfg *sourceConfig

	assigned    map[string]bool
	pending     map[int][]Split
	initialized bool // the first discovery's partitions were resolved
	noMore      bool // bounded: every split is known
	resolving   bool
}

func newEnumerator(ctx source.EnumeratorContext[Split], cfg *sourceConfig, st *EnumState) *enumerator {
	e := &enumerator{ctx: ctx, cfg: cfg, assigned: map[string]bool{}, pending: map[int][]Split{}}
	if st != nil {
		e.initialized = st.Initialized
		for _, id := range st.Assigned {
			e.assigned[id] = true
		}
		for _, s := range st.Pending {
			o := e.owner(s.Topic, s.Partition)
			e.pending[o] = append(e.pending[o], s)
		}
		e.noMore = cfg.bounded && e.initialized
	}
	return e
}

func (e *enumerator) owner(topic string, p int32) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(topic))
	n := e.ctx.Parallelism()
	return (int(h.Sum32()&0x7fffffff)%n + int(p)) % n
}

func (e *enumerator) Start(context.Context) error {
	period := e.cfg.discovery
	if e.cfg.bounded {
		period = 0
	}
	if e.initialized && e.cfg.bounded {
		return nil
	}
	e.ctx.CallAsync(e.discover, e.handleDiscovered, 0, period)
	return nil
}

func (e *enumerator) newAdmin(r *reach) (*kadm.Client, *kgo.Client, error) {
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(e.cfg.brokers...)}, e.cfg.clientOpts...), r.opt())...)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return kadm.NewClient(cl), cl, nil
}

type topicPartition struct {
	topic string
	p     int32
}

// withReach runs fn under a fresh reachability watcher: a connection
// that cannot be opened is retried (with backoff) until the connect
// timeout, whose expiry is then an *UnreachableError.
func (e *enumerator) withReach(ctx context.Context, fn func(context.Context, *reach) (any, error)) (any, error) {
	r := newReach(e.cfg.logger, "kafka source", e.cfg.brokers, e.cfg.connTimeout)
	defer r.close()
	bctx, stop := r.bound(ctx)
	defer stop()
	backoff := 100 * time.Millisecond
	for {
		v, err := fn(bctx, r)
		if err == nil || !isDialErr(err) || bctx.Err() != nil {
			return v, r.cause(err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-bctx.Done():
			t.Stop()
			return v, r.cause(bctx.Err())
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// discover lists the partitions to read. It runs off the coordinator.
func (e *enumerator) discover(ctx context.Context) (any, error) {
	return e.withReach(ctx, e.discoverWith)
}

func (e *enumerator) discoverWith(ctx context.Context, r *reach) (any, error) {
	adm, cl, err := e.newAdmin(r)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var topics []string
	switch {
	case len(e.cfg.topics) > 0:
		topics = e.cfg.topics
	case len(e.cfg.partitions) > 0:
		topics = slices.Collect(maps.Keys(e.cfg.partitions))
	}
	td, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		// kadm reports a topic the principal may not describe as the
		// error of the whole request.
		return nil, fmt.Errorf("kafka source: list topics on brokers %v: %w", e.cfg.brokers,
			authzError(err, cl, e.cfg.brokers, opDescribe, resourceNames{topic: strings.Join(topics, ",")}))
	}
	var out []topicPartition
	for _, t := range topics {
		d, ok := td[t]
		if !ok || d.Err != nil {
			cause := error(kerr.UnknownTopicOrPartition)
			if ok && d.Err != nil {
				cause = d.Err
			}
			if errors.Is(cause, kerr.TopicAuthorizationFailed) {
				// Kafka answers so for a topic the principal may not
				// describe, whether it exists or not.
				return nil, fmt.Errorf("kafka source: list topics: %w", authzError(cause, cl, e.cfg.brokers, opDescribe, resourceNames{topic: t}))
			}
			return nil, fmt.Errorf("%w: %q on brokers %v: %w", ErrTopicNotFound, t, e.cfg.brokers, cause)
		}
	}
	for name, d := range td {
		if d.Err != nil || d.IsInternal {
			continue
		}
		if e.cfg.pattern != nil && !e.cfg.pattern.MatchString(name) {
			continue
		}
		if want, ok := e.cfg.partitions[name]; ok {
			for _, p := range want {
				if _, exists := d.Partitions[p]; !exists {
					return nil, fmt.Errorf("%w: partition %d of topic %q does not exist (it has %d)", ErrTopicNotFound, p, name, len(d.Partitions))
				}
				out = append(out, topicPartition{name, p})
			}
			continue
		}
		for p := range d.Partitions {
			out = append(out, topicPartition{name, p})
		}
	}
	return out, nil
}

// fail fails the job with err (from CallAsync handlers, which cannot
// return it); the job restarts per its restart strategy.
func (e *enumerator) fail(err error) { e.ctx.FailJob(err) }

func (e *enumerator) handleDiscovered(res any, err error) {
	if err != nil {
		if !e.initialized {
			e.fail(err)
		}
		return
	}
	if e.resolving {
		return // the next discovery picks up what is still new
	}
	var fresh []topicPartition
	for _, tp := range res.([]topicPartition) {
		id := splitID(tp.topic, tp.p)
		if e.assigned[id] || e.isPending(id) {
			continue
		}
		fresh = append(fresh, tp)
	}
	if len(fresh) == 0 && e.initialized {
		return
	}
	initial := !e.initialized
	e.resolving = true
	e.ctx.CallAsync(func(ctx context.Context) (any, error) {
		return e.resolve(ctx, fresh, initial)
	}, e.handleResolved, 0, 0)
}

func (e *enumerator) isPending(id string) bool {
	for _, ss := range e.pending {
		for _, s := range ss {
			if s.SplitID() == id {
				return true
			}
		}
	}
	return false
}

func (e *enumerator) handleResolved(res any, err error) {
	e.resolving = false
	if err != nil {
		e.fail(err)
		return
	}
	for _, s := range res.([]Split) {
		o := e.owner(s.Topic, s.Partition)
		e.pending[o] = append(e.pending[o], s)
	}
	e.initialized = true
	if e.cfg.bounded {
		e.noMore = true
	}
	e.assignPending()
}

func (e *enumerator) assignPending() {
	regs := e.ctx.RegisteredReaders()
	asg := map[int][]Split{}
	for sub, ss := range e.pending {
		if _, ok := regs[sub]; ok && len(ss) > 0 {
			asg[sub] = ss
		}
	}
	if len(asg) > 0 {
		if err := e.ctx.AssignSplits(asg); err != nil {
			e.fail(fmt.Errorf("kafka source: assign splits: %w", err))
			return
		}
		for sub, ss := range asg {
			for _, s := range ss {
				e.assigned[s.SplitID()] = true
			}
			delete(e.pending, sub)
		}
	}
	if e.noMore {
		for sub := range regs {
			if len(e.pending[sub]) == 0 {
				e.ctx.SignalNoMoreSplits(sub)
			}
		}
	}
}

// resolve turns partitions into splits with concrete start and stop
// offsets. Partitions of the first discovery start at the starting offsets,
// later ones at the earliest offset.
func (e *enumerator) resolve(ctx context.Context, tps []topicPartition, initial bool) (any, error) {
	return e.withReach(ctx, func(ctx context.Context, r *reach) (any, error) { return e.resolveWith(ctx, r, tps, initial) })
}

func (e *enumerator) resolveWith(ctx context.Context, r *reach, tps []topicPartition, initial bool) (any, error) {
	splits := make([]Split, 0, len(tps))
	if len(tps) == 0 {
		return splits, nil
	}
	adm, cl, err := e.newAdmin(r)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	start := Earliest()
	if initial {
		start = e.cfg.start
	}
	starts, err := e.offsets(ctx, adm, cl, tps, start)
	if err != nil {
		return nil, err
	}
	stops := map[topicPartition]int64{}
	if e.cfg.stop.kind != kindNone {
		if stops, err = e.offsets(ctx, adm, cl, tps, e.cfg.stop); err != nil {
			return nil, err
		}
	}
	for _, tp := range tps {
		s := Split{Topic: tp.topic, Partition: tp.p, Offset: starts[tp], StopOffset: NoStop}
		if stop, ok := stops[tp]; ok {
			s.StopOffset = stop
		}
		splits = append(splits, s)
	}
	return splits, nil
}

func (e *enumerator) offsets(ctx context.Context, adm *kadm.Client, cl *kgo.Client, tps []topicPartition, spec OffsetSpec) (map[topicPartition]int64, error) {
	topicSet := map[string]bool{}
	for _, tp := range tps {
		topicSet[tp.topic] = true
	}
	topics := slices.Sorted(maps.Keys(topicSet))
	out := map[topicPartition]int64{}
	fromListed := func(lo kadm.ListedOffsets, err error, what string) error {
		if err != nil {
			return fmt.Errorf("kafka source: list %s offsets of %v: %w", what, topics,
				authzError(err, cl, e.cfg.brokers, opDescribe, resourceNames{topic: strings.Join(topics, ",")}))
		}
		for _, tp := range tps {
			o, ok := lo.Lookup(tp.topic, tp.p)
			if !ok {
				return fmt.Errorf("kafka source: no %s offset for topic %q partition %d", what, tp.topic, tp.p)
			}
			if o.Err != nil {
				return fmt.Errorf("kafka source: %s offset of topic %q partition %d: %w", what, tp.topic, tp.p,
					authzError(o.Err, cl, e.cfg.brokers, opDescribe, resourceNames{topic: tp.topic}))
			}
			out[tp] = o.Offset
		}
		return nil
	}
	switch spec.kind {
	case kindEarliest:
		lo, err := adm.ListStartOffsets(ctx, topics...)
		return out, fromListed(lo, err, "earliest")
	case kindLatest:
		var lo kadm.ListedOffsets
		var err error
		if e.cfg.readCommitted {
			lo, err = adm.ListCommittedOffsets(ctx, topics...)
		} else {
			lo, err = adm.ListEndOffsets(ctx, topics...)
		}
		return out, fromListed(lo, err, "latest")
	case kindTimestamp:
		lo, err := adm.ListOffsetsAfterMilli(ctx, spec.ts, topics...)
		return out, fromListed(lo, err, "timestamp")
	case kindCommitted, kindSpecific:
		var missing []topicPartition
		if spec.kind == kindCommitted {
			or, err := adm.FetchOffsets(ctx, e.cfg.group)
			if errors.Is(err, kerr.GroupIDNotFound) {
				or, err = kadm.OffsetResponses{}, nil // no offsets yet
			}
			if err != nil {
				return nil, fmt.Errorf("kafka source: fetch committed offsets of group %q: %w", e.cfg.group,
					authzError(err, cl, e.cfg.brokers, opDescribe, resourceNames{group: e.cfg.group}))
			}
			for _, tp := range tps {
				if o, ok := or.Lookup(tp.topic, tp.p); ok && o.Err == nil && o.At >= 0 {
					out[tp] = o.At
				} else {
					missing = append(missing, tp)
				}
			}
		} else {
			for _, tp := range tps {
				if o, ok := spec.specific[tp.topic][tp.p]; ok {
					out[tp] = o
				} else {
					missing = append(missing, tp)
				}
			}
		}
		if len(missing) == 0 {
			return out, nil
		}
		if spec.reset == nil {
			return nil, errors.New("kafka source: offset spec without fallback")
		}
		rest, err := e.offsets(ctx, adm, cl, missing, *spec.reset)
		if err != nil {
			return nil, err
		}
		maps.Copy(out, rest)
		return out, nil
	}
	return nil, fmt.Errorf("kafka source: unsupported offset spec %d", spec.kind)
}

func (e *enumerator) HandleSplitRequest(int, string) error { return nil }

func (e *enumerator) AddSplitsBack(splits []Split, _ int) error {
	for _, s := range splits {
		delete(e.assigned, s.SplitID())
		o := e.owner(s.Topic, s.Partition)
		e.pending[o] = append(e.pending[o], s)
	}
	e.assignPending()
	return nil
}

func (e *enumerator) AddReader(int) error {
	e.assignPending()
	return nil
}

func (e *enumerator) SnapshotState(int64) (EnumState, error) {
	st := EnumState{Assigned: slices.Sorted(maps.Keys(e.assigned)), Initialized: e.initialized}
	for _, ss := range e.pending {
		st.Pending = append(st.Pending, ss...)
	}
	return st, nil
}

func (e *enumerator) Close() error { return nil }
