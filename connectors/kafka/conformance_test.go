package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/connectortest"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
)

// The conformance suite (connectortest) runs against a fresh kfake cluster
// per case and, with SLUICE_KAFKA_BROKERS set, against the real broker,
// where every case gets its own topic and transactional-id prefix.
//
// A test split is a partition: the source context writes split i to
// partition i; the sink keys each record by its split, so one split lands
// in one partition and its order can be checked there.

// confCluster opens the Kafka cluster of one conformance case: its brokers
// and a function releasing it.
type confCluster func() (brokers []string, release func(), err error)

// forEachConfBackend runs fn with a cluster opener for kfake (a cluster
// per case, closed with the case's context) and, when SLUICE_KAFKA_BROKERS
// is set, for the real broker.
func forEachConfBackend(t *testing.T, fn func(t *testing.T, open confCluster)) {
	t.Helper()
	t.Run("kfake", func(t *testing.T) {
		fn(t, func() ([]string, func(), error) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
			if err != nil {
				return nil, nil, err
			}
			return c.ListenAddrs(), c.Close, nil
		})
	})
	t.Run("real", func(t *testing.T) {
		brokers := realBrokers(t)
		fn(t, func() ([]string, func(), error) { return brokers, func() {}, nil })
	})
}

// confTopic creates a topic with the given partitions.
func confTopic(brokers []string, partitions int32) (string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	name := uniqueName("conf")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return "", fmt.Errorf("create topic %s on %v: %w", name, brokers, err)
	}
	// Wait (bounded) until every partition is served: a busy broker lists
	// a new topic a moment before it answers for it (CI once read
	// UNKNOWN_TOPIC_OR_PARTITION from ListOffsets right after the create).
	adm := kadm.NewClient(cl)
	for i := 0; !topicReady(ctx, adm, name, int(partitions)); i++ {
		if i == 200 {
			return "", fmt.Errorf("topic %s on %v is not served after 10s", name, brokers)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return name, nil
}

// sourceConf is a topic with one partition per test split.
type sourceConf struct {
	brokers []string
	release func()
	topic   string
	bounded bool
	prod    *kgo.Client
}

func newSourceConf(open confCluster) func(connectortest.SourceSettings) (connectortest.SourceContext[string, Split, EnumState], error) {
	return func(s connectortest.SourceSettings) (connectortest.SourceContext[string, Split, EnumState], error) {
		brokers, release, err := open()
		if err != nil {
			return nil, err
		}
		topic, err := confTopic(brokers, int32(s.Splits))
		if err != nil {
			release()
			return nil, err
		}
		prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.DefaultProduceTopic(topic))
		if err != nil {
			release()
			return nil, err
		}
		return &sourceConf{brokers: brokers, release: release, topic: topic, bounded: s.Bounded, prod: prod}, nil
	}
}

// Write produces the records to partition split, in order (the producer is
// idempotent, so retries keep the order).
func (c *sourceConf) Write(split int, rs []connectortest.Record) error {
	recs := make([]*kgo.Record, len(rs))
	for i, r := range rs {
		recs[i] = &kgo.Record{Partition: int32(split), Value: []byte(r.String())}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.prod.ProduceSync(ctx, recs...).FirstErr()
}

func (c *sourceConf) Source() (source.Source[string, Split, EnumState], error) {
	opts := []SourceOption{Topics(c.topic), SourceLogger(quiet)}
	if c.bounded {
		opts = append(opts, Bounded(Latest()))
	}
	return NewSource(c.brokers, StringDeserializer(), opts...)
}

func (c *sourceConf) Record(v string) (connectortest.Record, error) {
	return connectortest.ParseRecord(v)
}

func (c *sourceConf) Close() error {
	c.prod.Close()
	c.release()
	return nil
}

// sinkConf is the sink's output topic, read back with a read_committed
// consumer that keeps what it read between calls.
type sinkConf struct {
	brokers []string
	release func()
	topic   string
	prefix  string
	g       Guarantee

	mu   sync.Mutex
	cons *kgo.Client
	adm  *kadm.Client
	recs []connectortest.Record
	next map[int32]int64 // next offset per partition, control records included
}

// sinkConfPartitions is the output topic's partition count; the suite
// writes 4 splits, keyed by split.
const sinkConfPartitions = 4

func newSinkConf(open confCluster) func(connectortest.SinkSettings) (connectortest.SinkContext[connectortest.Record], error) {
	return func(s connectortest.SinkSettings) (connectortest.SinkContext[connectortest.Record], error) {
		g := AtLeastOnce
		if s.Guarantee == connectortest.ExactlyOnce {
			g = ExactlyOnce
		}
		brokers, release, err := open()
		if err != nil {
			return nil, err
		}
		topic, err := confTopic(brokers, sinkConfPartitions)
		if err != nil {
			release()
			return nil, err
		}
		cons, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.KeepControlRecords(), kgo.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			release()
			return nil, err
		}
		return &sinkConf{brokers: brokers, release: release, topic: topic, prefix: uniqueName("conf-" + g.String()),
			g: g, cons: cons, adm: kadm.NewClient(cons), next: map[int32]int64{}}, nil
	}
}

// recordSerializer writes a test record as its text form, keyed by split.
func recordSerializer() Serializer[connectortest.Record] {
	return SerializerFunc[connectortest.Record](func(r connectortest.Record, kr *kgo.Record) error {
		kr.Key = fmt.Appendf(nil, "split-%d", r.Split)
		kr.Value = []byte(r.String())
		return nil
	})
}

func (c *sinkConf) Sink() (sink.Sink[connectortest.Record], error) {
	return NewSink(c.brokers, recordSerializer(), DefaultTopic(c.topic), DeliveryGuarantee(c.g),
		TransactionalIDPrefix(c.prefix), TransactionTimeout(2*time.Minute), SinkLogger(quiet))
}

func (c *sinkConf) Value(r connectortest.Record) connectortest.Record { return r }

// Committed reads the topic up to each partition's last stable offset, as
// listed when it is called, once the commits in flight have completed.
//
// A commit (EndTxn) is decided when the coordinator logs PrepareCommit and
// answers; Apache Kafka then writes the commit markers to the partitions
// and only after that moves the stable offsets and the transaction to
// CompleteCommit. So right after a committer returned, a read_committed
// reader may not see the transaction yet, though nothing can undo it:
// Committed first waits (up to 10 s) until no transaction of the sink's
// prefix is in PrepareCommit. Open (Ongoing) transactions are not waited
// for, so the nothing-visible-before-commit probe still sees the view
// before the commit.
//
// If nothing arrives for 3 s it returns what it
// has: an aborted transaction whose abort marker lies beyond an open
// transaction is never delivered before that one ends (the probe of
// nothing-visible-before-commit reads while transactions are open; after a
// job no transaction is open and the stable offsets are always reached).
func (c *sinkConf) Committed() ([]connectortest.Record, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 100 {
		committing, err := c.transactions(ctx, "PrepareCommit")
		if err != nil {
			return nil, err
		}
		if len(committing) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	lo, err := c.adm.ListCommittedOffsets(ctx, c.topic)
	if err != nil {
		return nil, fmt.Errorf("list stable offsets of %s: %w", c.topic, err)
	}
	target := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil && err == nil {
			err = fmt.Errorf("stable offset of %s[%d]: %w", o.Topic, o.Partition, o.Err)
		}
		target[o.Partition] = o.Offset
	})
	if err != nil {
		return nil, err
	}
	caughtUp := func() bool {
		for p, end := range target {
			if c.next[p] < end {
				return false
			}
		}
		return true
	}
	for empty := 0; !caughtUp() && empty < 6; {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := c.cons.PollFetches(pctx)
		pcancel()
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) && !errors.Is(e.Err, context.Canceled) {
				return nil, fmt.Errorf("consume %s[%d]: %w", e.Topic, e.Partition, e.Err)
			}
		}
		n := 0
		var perr error
		fs.EachRecord(func(r *kgo.Record) {
			n++
			c.next[r.Partition] = max(c.next[r.Partition], r.Offset+1)
			if r.Attrs.IsControl() {
				return
			}
			rec, err := connectortest.ParseRecord(string(r.Value))
			if err != nil && perr == nil {
				perr = fmt.Errorf("%s[%d]@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			c.recs = append(c.recs, rec)
		})
		if perr != nil {
			return nil, perr
		}
		if n == 0 {
			empty++
		} else {
			empty = 0
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read %s up to its stable offsets %v: reached %v: %w", c.topic, target, c.next, ctx.Err())
		}
	}
	return slices.Clone(c.recs), nil
}

// Pending lists the transactions of the sink's prefix the broker holds
// open. A transaction being aborted (PrepareAbort) finishes on its own, so
// Pending waits (up to 5 s) for the list to empty before returning it.
func (c *sinkConf) Pending() ([]string, error) {
	var out []string
	for range 25 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var err error
		out, err = c.transactions(ctx, "Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
		cancel()
		if err != nil || len(out) == 0 {
			return out, err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return out, nil
}

// transactions lists the transactions of the sink's prefix in the states.
func (c *sinkConf) transactions(ctx context.Context, states ...string) ([]string, error) {
	listed, err := c.adm.ListTransactions(ctx, nil, states)
	if err != nil {
		return nil, fmt.Errorf("list transactions on %v: %w", c.brokers, err)
	}
	var out []string
	for id, tx := range listed {
		if _, _, ok := parseTxnID(c.prefix, id); ok {
			out = append(out, fmt.Sprintf("%s (%s)", id, tx.State))
		}
	}
	slices.Sort(out)
	return out, nil
}

func (c *sinkConf) Close() error {
	c.cons.Close()
	c.release()
	return nil
}

// TestConformanceSource runs connectortest.TestSource for the Kafka source
// (read_committed, behind the suite's exactly-once sink).
func TestConformanceSource(t *testing.T) {
	forEachConfBackend(t, func(t *testing.T, open confCluster) {
		connectortest.TestSource(t, newSourceConf(open))
	})
}

// TestConformanceSink runs connectortest.TestSink for the exactly-once
// and the at-least-once sink.
func TestConformanceSink(t *testing.T) {
	forEachConfBackend(t, func(t *testing.T, open confCluster) {
		connectortest.TestSink(t, newSinkConf(open),
			connectortest.Guarantees(connectortest.ExactlyOnce, connectortest.AtLeastOnce))
	})
}
