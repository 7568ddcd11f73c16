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

	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/enumerate"
)

// enumerator discovers partitions and pushes each to its owner reader:
// owner = (hash(topic) + partition) % parallelism, so a topic's partitions
// spread evenly. It is an enumerate.Discovered: discovery and the offset
// lookups of new partitions (its Prepare step) run in CallAsync; the
// enumerator's own methods never block. A partition, once discovered, is
// remembered for good (EnumState.Assigned and Pending), so it is never read
// from its start offset twice.
//
// A failed discovery fails the job until the first one succeeded; after
// that it is retried at the next discovery. A failed offset lookup fails
// the job.
type enumerator struct {
	*enumerate.Discovered[Split]
	cfg *sourceConfig
}

func newEnumerator(ctx source.EnumeratorContext[Split], cfg *sourceConfig, st *EnumState) *enumerator {
	e := &enumerator{cfg: cfg}
	b := source.ContinuousUnbounded
	if cfg.bounded {
		b = source.Bounded
	}
	d := enumerate.Discovery[Split]{
		Discover: e.discover,
		Interval: cfg.discovery,
		Prepare:  e.resolve,
		OnError: func(err error, _ int) error {
			if e.Done() {
				return nil // retried at the next discovery
			}
			return err
		},
	}
	var kst enumerate.DiscoveredState[Split]
	if st != nil {
		kst = enumerate.DiscoveredState[Split]{Pending: st.Pending, Known: st.Assigned, Done: st.Initialized}
	}
	e.Discovered = enumerate.NewDiscovered(ctx, d, b, kst, enumerate.Push(func(s Split, n int) int {
		return owner(s.Topic, s.Partition, n)
	}))
	return e
}

// owner is the subtask that reads partition p of topic, of n.
func owner(topic string, p int32, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(topic))
	return (int(h.Sum32()&0x7fffffff)%n + int(p)) % n
}

// SnapshotState returns the state in the Kafka source's format: the
// partitions assigned (every known one that is not pending), the pending
// splits, and whether the first discovery was resolved.
func (e *enumerator) SnapshotState(id int64) (EnumState, error) {
	kst, err := e.Discovered.SnapshotState(id)
	if err != nil {
		return EnumState{}, err
	}
	pending := map[string]bool{}
	for _, s := range kst.Pending {
		pending[s.SplitID()] = true
	}
	st := EnumState{Assigned: []string{}, Pending: kst.Pending, Initialized: kst.Done}
	for _, k := range kst.Known {
		if !pending[k] {
			st.Assigned = append(st.Assigned, k)
		}
	}
	return st, nil
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

// discover lists the partitions to read, as splits without offsets. It
// runs off the coordinator.
func (e *enumerator) discover(ctx context.Context) ([]Split, error) {
	res, err := e.withReach(ctx, e.discoverWith)
	tps, _ := res.([]topicPartition)
	splits := make([]Split, len(tps))
	for i, tp := range tps {
		splits[i] = Split{Topic: tp.topic, Partition: tp.p}
	}
	return splits, err
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

// resolve turns partitions into splits with concrete start and stop
// offsets. Partitions of the first discovery start at the starting offsets,
// later ones at the earliest offset.
func (e *enumerator) resolve(ctx context.Context, fresh []Split, initial bool) ([]Split, error) {
	tps := make([]topicPartition, len(fresh))
	for i, s := range fresh {
		tps[i] = topicPartition{s.Topic, s.Partition}
	}
	res, err := e.withReach(ctx, func(ctx context.Context, r *reach) (any, error) { return e.resolveWith(ctx, r, tps, initial) })
	splits, _ := res.([]Split)
	return splits, err
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
				} else if _, named := spec.specific[tp.topic]; !named && spec.specific[""] != nil {
					if o, ok := spec.specific[""][tp.p]; ok {
						out[tp] = o
					} else {
						missing = append(missing, tp)
					}
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
	case kindNoReset:
		slices.SortFunc(tps, func(a, b topicPartition) int {
			if c := strings.Compare(a.topic, b.topic); c != 0 {
				return c
			}
			return int(a.p - b.p)
		})
		names := make([]string, len(tps))
		for i, tp := range tps {
			names[i] = fmt.Sprintf("topic %q partition %d", tp.topic, tp.p)
		}
		what := "no offset given"
		if e.cfg.group != "" {
			what = fmt.Sprintf("no committed offset in group %q (nor a given one)", e.cfg.group)
		}
		// A restart would meet the same missing offsets: fail at once.
		return nil, fmt.Errorf("kafka source: %w: %w: %s for %s", restart.ErrUnrecoverable, ErrNoStartOffset, what, strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("kafka source: unsupported offset spec %d", spec.kind)
}
