package kafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/restart"
)

// topicCreation is what [CreateTopic] asks for.
type topicCreation struct {
	partitions  int32
	replication int16
	configs     map[string]string
}

// CreateTopic lets the sink create its [DefaultTopic] when it does not
// exist: every writer checks at start (through the start's ctx and
// SetupTimeout) and creates it with this many partitions and this
// replication factor (-1 for either = the broker's default:
// num.partitions, default.replication.factor) and these topic configs
// (e.g. "cleanup.policy": "compact"; nil = none). Writers of several
// subtasks or jobs racing to create it all succeed (the broker's
// TOPIC_ALREADY_EXISTS counts as created). An existing topic is used as
// it is: its partitions and configs are not compared or changed.
//
// Without it (the default) a missing DefaultTopic fails the writer's start
// with a *TopicNotFoundError (ErrTopicNotFound), which also matches
// restart.ErrUnrecoverable: a restart would not create the topic —
// unless the client options ([SinkClientOpts]) hold
// kgo.AllowAutoTopicCreation, which leaves creating it to the producer
// and the broker's auto.create.topics.enable.
func CreateTopic(partitions int32, replicationFactor int16, configs map[string]string) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) {
		c.create = &topicCreation{partitions: partitions, replication: replicationFactor, configs: maps.Clone(configs)}
	})
}

// TopicNotFoundError is the error of a sink whose DefaultTopic does not
// exist while [CreateTopic] is not set. It matches ErrTopicNotFound and
// restart.ErrUnrecoverable.
type TopicNotFoundError struct {
	Topic   string
	Brokers []string
	Err     error // the broker's answer (kerr.UnknownTopicOrPartition)
}

func (e *TopicNotFoundError) Error() string {
	return fmt.Sprintf("kafka sink: %v: topic %q does not exist on brokers %v (%v); create it, or let the sink create it (kafka.CreateTopic; in a pipeline: topic-create: true)",
		ErrTopicNotFound, e.Topic, e.Brokers, e.Err)
}

// Unwrap returns ErrTopicNotFound, restart.ErrUnrecoverable and the
// broker's error.
func (e *TopicNotFoundError) Unwrap() []error {
	return []error{ErrTopicNotFound, restart.ErrUnrecoverable, e.Err}
}

// Acks is how many acknowledgements a produce request waits for.
type Acks int

const (
	// AllAcks waits for every in-sync replica (acks=all): the only
	// setting of an idempotent or transactional producer.
	AllAcks Acks = iota + 1
	// LeaderAck waits for the partition leader only (acks=1); the
	// producer is not idempotent then (retries may duplicate records).
	LeaderAck
	// NoAck waits for nothing (acks=0): records may be lost unseen.
	NoAck
)

func (a Acks) String() string {
	switch a {
	case AllAcks:
		return "all"
	case LeaderAck:
		return "1"
	case NoAck:
		return "0"
	}
	return fmt.Sprintf("Acks(%d)", int(a))
}

// ProducerAcks sets the producer's acks for None and AtLeastOnce. The
// default is AllAcks (idempotent writes) for AtLeastOnce and LeaderAck
// for None. LeaderAck and NoAck turn idempotent writes off. ExactlyOnce
// needs AllAcks: any other value is a configuration error.
func ProducerAcks(a Acks) SinkOption { return sinkOptionFunc(func(c *sinkConfig) { c.acks = a }) }

// Compression names a producer batch compression codec.
type Compression string

// The codecs Kafka knows.
const (
	NoCompression     Compression = "none"
	GzipCompression   Compression = "gzip"
	SnappyCompression Compression = "snappy"
	LZ4Compression    Compression = "lz4"
	ZstdCompression   Compression = "zstd"
)

func (c Compression) codec() (kgo.CompressionCodec, bool) {
	switch c {
	case NoCompression:
		return kgo.NoCompression(), true
	case GzipCompression:
		return kgo.GzipCompression(), true
	case SnappyCompression:
		return kgo.SnappyCompression(), true
	case LZ4Compression:
		return kgo.Lz4Compression(), true
	case ZstdCompression:
		return kgo.ZstdCompression(), true
	}
	return kgo.CompressionCodec{}, false
}

// ProducerCompression sets the codec of produced batches. The default is
// franz-go's: snappy (none where the broker is too old for it).
func ProducerCompression(c Compression) SinkOption {
	return sinkOptionFunc(func(cfg *sinkConfig) { cfg.compression = c })
}

// Partitioner chooses the partition of each record that has none.
type Partitioner string

// The partitioners franz-go offers.
const (
	// DefaultPartitioner is franz-go's default, which is Kafka's Java
	// client's: a record with a key goes to murmur2(key) % partitions; a
	// record without one to a partition kept for a whole batch (sticky,
	// KIP-480).
	DefaultPartitioner Partitioner = "default"
	// HashKeyPartitioner hashes keys like DefaultPartitioner; it is named
	// for Flink users (records without a key: sticky, as there).
	HashKeyPartitioner Partitioner = "hash-key"
	// RoundRobinPartitioner sends each record to the next partition,
	// ignoring keys.
	RoundRobinPartitioner Partitioner = "round-robin"
	// StickyPartitioner keeps one partition for a whole batch, ignoring
	// keys.
	StickyPartitioner Partitioner = "sticky"
)

func (p Partitioner) partitioner() (kgo.Partitioner, bool) {
	switch p {
	case DefaultPartitioner, HashKeyPartitioner:
		return kgo.StickyKeyPartitioner(nil), true
	case RoundRobinPartitioner:
		return kgo.RoundRobinPartitioner(), true
	case StickyPartitioner:
		return kgo.StickyPartitioner(), true
	}
	return nil, false
}

// RecordPartitioner sets how records without a partition are spread
// (default DefaultPartitioner).
func RecordPartitioner(p Partitioner) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.partitioner = p })
}

// validateProducer checks the options of this file.
func (c *sinkConfig) validateProducer() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: sink: %s", ErrInvalidConfig, fmt.Sprintf(format, a...))
	}
	switch {
	case c.acks != 0 && c.acks != AllAcks && c.acks != LeaderAck && c.acks != NoAck:
		return bad("ProducerAcks is %v; allowed: AllAcks, LeaderAck, NoAck", c.acks)
	case c.acks != 0 && c.acks != AllAcks && c.guarantee == ExactlyOnce:
		return bad("ProducerAcks is %v, but ExactlyOnce needs AllAcks (transactions are idempotent): leave acks unset or use AtLeastOnce", c.acks)
	case c.create != nil && c.topic == "":
		return bad("CreateTopic needs DefaultTopic (the topic to create)")
	case c.create != nil && (c.create.partitions == 0 || c.create.partitions < -1):
		return bad("CreateTopic partitions is %d; allowed: at least 1, or -1 for the broker's num.partitions", c.create.partitions)
	case c.create != nil && (c.create.replication == 0 || c.create.replication < -1):
		return bad("CreateTopic replication factor is %d; allowed: at least 1, or -1 for the broker's default.replication.factor", c.create.replication)
	}
	if c.compression != "" {
		if _, ok := c.compression.codec(); !ok {
			return bad("ProducerCompression is %q; allowed: none, gzip, snappy, lz4, zstd", string(c.compression))
		}
	}
	if c.partitioner != "" {
		if _, ok := c.partitioner.partitioner(); !ok {
			return bad("RecordPartitioner is %q; allowed: default, hash-key, round-robin, sticky", string(c.partitioner))
		}
	}
	return nil
}

// producerSettings are the client options of this file's settings.
func (c *sinkConfig) producerSettings() []kgo.Opt {
	var opts []kgo.Opt
	if codec, ok := c.compression.codec(); ok {
		opts = append(opts, kgo.ProducerBatchCompression(codec))
	}
	if p, ok := c.partitioner.partitioner(); ok {
		opts = append(opts, kgo.RecordPartitioner(p))
	}
	if c.guarantee == ExactlyOnce {
		return opts
	}
	acks := c.acks
	if acks == 0 {
		acks = AllAcks
		if c.guarantee == None {
			acks = LeaderAck
		}
	}
	switch acks {
	case LeaderAck:
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case NoAck:
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	}
	return opts
}

// ensureTopic checks, with cl, that the DefaultTopic exists, and creates
// it when CreateTopic allows. Per-record topics (no DefaultTopic) are not
// checked.
func (c *sinkConfig) ensureTopic(ctx context.Context, cl *kgo.Client, w *reach) error {
	if c.topic == "" {
		return nil
	}
	if auto, _ := cl.OptValue(kgo.AllowAutoTopicCreation).(bool); auto && c.create == nil {
		return nil // the producer asks the broker to create it (SinkClientOpts)
	}
	adm := kadm.NewClient(cl)
	if err := c.describeTopic(ctx, adm, cl, w); err == nil || !errors.Is(err, errTopicUnknown) {
		return err
	}
	cause := error(kerr.UnknownTopicOrPartition)
	if c.create == nil {
		return &TopicNotFoundError{Topic: c.topic, Brokers: slices.Clone(c.brokers), Err: cause}
	}
	var configs map[string]*string
	if len(c.create.configs) > 0 {
		configs = make(map[string]*string, len(c.create.configs))
		for k, v := range c.create.configs {
			configs[k] = &v
		}
	}
	resp, err := adm.CreateTopic(ctx, c.create.partitions, c.create.replication, configs, c.topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case err == nil:
		c.logger.Info("kafka sink: created topic", "topic", c.topic, "partitions", resp.NumPartitions,
			"replicationFactor", resp.ReplicationFactor, "configs", c.create.configs)
		return nil
	case errors.Is(err, kerr.TopicAlreadyExists):
		return nil // another writer or job created it first
	case isAuthErr(err):
		return fmt.Errorf("kafka sink: create topic %q: %w", c.topic,
			authzError(err, cl, c.brokers, "CREATE", resourceNames{topic: c.topic}))
	}
	msg := ""
	if resp.ErrMessage != "" {
		msg = " (" + resp.ErrMessage + ")"
	}
	err = fmt.Errorf("kafka sink: create topic %q with %d partitions, replication factor %d, configs %v on brokers %v%s: %w",
		c.topic, c.create.partitions, c.create.replication, c.create.configs, c.brokers, msg, w.cause(err))
	if isConfigErr(err) {
		// The broker refused the request itself: a restart sends it again.
		return fmt.Errorf("%w: %w", restart.ErrUnrecoverable, err)
	}
	return err
}

// errTopicUnknown is describeTopic's answer for a topic the broker does
// not know.
var errTopicUnknown = errors.New("unknown topic")

// unknownTopicGrace is how long describeTopic keeps asking about a topic
// the broker does not know (without CreateTopic), 100ms, 200ms, 400ms, …
// at most 1s apart: a topic created just before the job may not have
// reached the broker's metadata yet — on a busy broker that took more than
// the 1.5s this was once (CI: UNKNOWN_TOPIC_OR_PARTITION for a topic
// created 2s earlier). A topic that is really missing fails the job after
// it, without restarts.
const unknownTopicGrace = 10 * time.Second

// describeTopic returns nil when the DefaultTopic exists, errTopicUnknown
// when the broker does not know it, or the error that stopped it. It asks
// again after retriable answers (a leader being elected, a broker not
// answering) until ctx ends (the setup and connect timeouts).
func (c *sinkConfig) describeTopic(ctx context.Context, adm *kadm.Client, cl *kgo.Client, w *reach) error {
	backoff := 100 * time.Millisecond
	unknownUntil := time.Now().Add(unknownTopicGrace)
	if c.create != nil {
		unknownUntil = time.Time{} // creating it settles the question
	}
	for {
		td, err := adm.ListTopics(ctx, c.topic)
		if err == nil {
			if d, ok := td[c.topic]; !ok {
				err = kerr.UnknownTopicOrPartition
			} else {
				err = d.Err
			}
		}
		var ke *kerr.Error
		switch {
		case err == nil:
			return nil
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			if !time.Now().Before(unknownUntil) {
				return errTopicUnknown
			}
		case isAuthErr(err):
			return fmt.Errorf("kafka sink: describe topic %q: %w", c.topic,
				authzError(err, cl, c.brokers, opDescribe, resourceNames{topic: c.topic}))
		case ctx.Err() != nil:
			return c.describeStopped(ctx, err, w)
		case errors.As(err, &ke) && !ke.Retriable:
			return fmt.Errorf("kafka sink: describe topic %q on brokers %v: %w", c.topic, c.brokers, err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return c.describeStopped(ctx, err, w)
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

// describeStopped is describeTopic's error once ctx ended: the
// *UnreachableError when the connect timeout ended it, else ctx's error
// with the last answer.
func (c *sinkConfig) describeStopped(ctx context.Context, last error, w *reach) error {
	if u := w.err(); u != nil {
		return u
	}
	return fmt.Errorf("kafka sink: describe topic %q on brokers %v: %w (last error: %v)", c.topic, c.brokers, context.Cause(ctx), last)
}

// isConfigErr reports a CreateTopics answer that retrying does not change.
func isConfigErr(err error) bool {
	return errors.Is(err, kerr.InvalidPartitions) || errors.Is(err, kerr.InvalidReplicationFactor) ||
		errors.Is(err, kerr.InvalidConfig) || errors.Is(err, kerr.InvalidTopicException) ||
		errors.Is(err, kerr.PolicyViolation) || errors.Is(err, kerr.InvalidReplicaAssignment)
}
