package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
)

// Split is one topic partition and the reader's progress in it.
type Split struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Offset is the next offset to read.
	Offset int64 `json:"offset"`
	// StopOffset, if not NoStop, is the offset at which the split ends
	// (exclusive).
	StopOffset int64 `json:"stop_offset"`
}

// NoStop in Split.StopOffset means the split never ends.
const NoStop int64 = -1

// SplitID is "<topic>-<partition>".
func (s Split) SplitID() string { return splitID(s.Topic, s.Partition) }

func splitID(topic string, p int32) string { return fmt.Sprintf("%s-%d", topic, p) }

// EnumState is the enumerator's checkpoint: the partitions it has already
// handed out (or holds for readers not yet registered).
type EnumState struct {
	Assigned []string `json:"assigned"`
	Pending  []Split  `json:"pending,omitempty"`
	// Initialized is set once the first discovery's partitions were
	// resolved with the starting offsets; later ones start at Earliest.
	Initialized bool `json:"initialized"`
}

var (
	splitSerde = serde.JSON[Split](1)
	enumSerde  = serde.JSON[EnumState](1)
)

// OffsetSpec says where a partition starts or stops: see [Earliest],
// [Latest], [Committed], [AtTimestamp] and [AtOffsets].
type OffsetSpec struct {
	kind     offsetKind
	ts       int64
	specific map[string]map[int32]int64
	reset    *OffsetSpec
}

type offsetKind int

const (
	kindNone offsetKind = iota
	kindEarliest
	kindLatest
	kindCommitted
	kindTimestamp
	kindSpecific
	kindNoReset
)

// Earliest is each partition's log start offset.
func Earliest() OffsetSpec { return OffsetSpec{kind: kindEarliest} }

// Latest is each partition's end: the last stable offset for read_committed
// readers, the high watermark otherwise.
func Latest() OffsetSpec { return OffsetSpec{kind: kindLatest} }

// Committed is the consumer group's committed offset, or reset (Earliest,
// Latest or [NoReset]) for partitions without one. It requires [GroupID].
func Committed(reset OffsetSpec) OffsetSpec { return OffsetSpec{kind: kindCommitted, reset: &reset} }

// NoReset, as the reset of [Committed] or the fallback of [AtOffsets],
// fails the source (an error wrapping [ErrNoStartOffset] and
// restart.ErrUnrecoverable, naming the topic and partition) when a partition has no committed or given offset,
// like Kafka's auto.offset.reset=none. It is not a starting or stopping
// offset by itself.
func NoReset() OffsetSpec { return OffsetSpec{kind: kindNoReset} }

// ErrNoStartOffset is wrapped when a partition has no offset and the reset
// is [NoReset].
var ErrNoStartOffset = errors.New("kafka: no offset for partition (reset: none)")

// AtTimestamp is the first offset whose record timestamp is at or after ms
// (milliseconds since the epoch), or the end of the partition.
func AtTimestamp(ms int64) OffsetSpec { return OffsetSpec{kind: kindTimestamp, ts: ms} }

// AtOffsets gives offsets per topic and partition; partitions not listed
// use fallback. The topic "" gives offsets for the partitions of every topic
// not listed by name (a partition of a listed topic that its entry omits
// uses fallback).
func AtOffsets(offsets map[string]map[int32]int64, fallback OffsetSpec) OffsetSpec {
	return OffsetSpec{kind: kindSpecific, specific: offsets, reset: &fallback}
}

// ErrorPolicy says what the source does with a record its deserializer
// rejects.
type ErrorPolicy int

const (
	// FailOnError fails the job with an error naming topic, partition,
	// offset and cause (the default).
	FailOnError ErrorPolicy = iota
	// SkipOnError drops the record, counts it in numRecordsInErrors and
	// logs it with topic, partition and offset: the first at once, then
	// at most one warning per reader every 10 s, with the number skipped
	// since the last one.
	SkipOnError
)

// SourceOption configures a source; see the functions that return one.
type SourceOption interface{ apply(*sourceConfig) }

type sourceOptionFunc func(*sourceConfig)

func (f sourceOptionFunc) apply(c *sourceConfig) { f(c) }

type sourceConfig struct {
	brokers        []string
	topics         []string
	pattern        *regexp.Regexp
	partitions     map[string][]int32
	start          OffsetSpec
	stop           OffsetSpec
	bounded        bool
	group          string
	readCommitted  bool
	discovery      time.Duration
	policy         ErrorPolicy
	maxPollRecords int
	fetchMaxWait   time.Duration
	clientOpts     []kgo.Opt
	logger         *slog.Logger
	connTimeout    time.Duration
	// malformedLogEvery bounds the warnings about skipped records
	// (tests shorten or lengthen it).
	malformedLogEvery time.Duration
}

// malformedLogEvery is how often at most a reader logs a skipped record
// (the file source uses the same bound).
const malformedLogEvery = 10 * time.Second

func defaultSourceConfig() sourceConfig {
	return sourceConfig{
		start:          Earliest(),
		readCommitted:  true,
		discovery:      30 * time.Second,
		policy:         FailOnError,
		maxPollRecords: 2000,
		fetchMaxWait:   500 * time.Millisecond,
		logger:         slog.Default(),

		connTimeout:       DefaultConnectTimeout,
		malformedLogEvery: malformedLogEvery,
	}
}

func (c *sourceConfig) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: source: %s", ErrInvalidConfig, fmt.Sprintf(format, a...))
	}
	n := 0
	if len(c.topics) > 0 {
		n++
	}
	if c.pattern != nil {
		n++
	}
	if len(c.partitions) > 0 {
		n++
	}
	switch {
	case len(c.brokers) == 0:
		return bad("no brokers: pass at least one host:port")
	case n != 1:
		return bad("set exactly one of Topics, TopicPattern, Partitions (got %d)", n)
	case c.start.kind == kindNone:
		return bad("StartingOffsets is empty")
	case c.start.kind == kindCommitted && c.group == "":
		return bad("StartingOffsets Committed requires GroupID")
	case c.start.kind == kindNoReset:
		return bad("StartingOffsets cannot be NoReset (it is a reset: Committed(NoReset()) or AtOffsets(…, NoReset()))")
	case c.start.kind == kindCommitted && (c.start.reset == nil || (c.start.reset.kind != kindEarliest && c.start.reset.kind != kindLatest && c.start.reset.kind != kindNoReset)):
		return bad("Committed's reset must be Earliest, Latest or NoReset")
	case c.stop.kind == kindNoReset:
		return bad("stopping offsets cannot be NoReset")
	case c.stop.kind == kindCommitted:
		return bad("stopping offsets cannot be Committed; allowed: Latest, AtTimestamp, AtOffsets")
	case c.discovery < 0:
		return bad("PartitionDiscovery is %v; must be >= 0 (0 disables it)", c.discovery)
	case c.connTimeout <= 0:
		return bad("ConnectTimeout is %v; must be positive", c.connTimeout)
	case c.maxPollRecords < 1:
		return bad("MaxPollRecords is %d; must be >= 1", c.maxPollRecords)
	}
	for _, t := range c.topics {
		if t == "" {
			return bad("empty topic name")
		}
	}
	return nil
}

// Topics subscribes to a fixed list of topics. There is no default: a
// source needs Topics, TopicPattern or Partitions.
func Topics(topics ...string) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.topics = append(c.topics, topics...) })
}

// TopicPattern subscribes to every topic whose name matches re (checked at
// every partition discovery). Default: none (see Topics).
func TopicPattern(re *regexp.Regexp) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.pattern = re })
}

// Partitions reads exactly the given partitions of each topic. Default:
// every partition of the subscribed topics.
func Partitions(p map[string][]int32) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.partitions = p })
}

// StartingOffsets sets where partitions found at the first start begin
// (default Earliest). Partitions discovered later start from Earliest.
func StartingOffsets(o OffsetSpec) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.start = o })
}

// Bounded makes the source end at the stopping offsets (resolved once, at
// the first start): Latest, AtTimestamp or AtOffsets. Partition discovery
// is off in bounded mode. Default: unbounded.
func Bounded(stop OffsetSpec) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.stop, c.bounded = stop, true })
}

// UnboundedStopAt keeps the source unbounded (it never reports the end of
// input) but stops reading each partition at the stopping offsets.
// Default: no stopping offsets.
func UnboundedStopAt(stop OffsetSpec) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.stop, c.bounded = stop, false })
}

// GroupID sets the consumer group to which offsets are committed once every
// sink of the job committed a checkpoint's output (in the background; Close waits for a commit in
// flight, so the final checkpoint of a stop or of the end of input is
// committed before the source closes). Recovery uses checkpoints; a fresh
// start with [Committed] continues at the group's offsets. Default: none,
// and nothing is committed.
func GroupID(g string) SourceOption { return sourceOptionFunc(func(c *sourceConfig) { c.group = g }) }

// ReadUncommitted reads records of open and aborted transactions too
// (default: read_committed).
func ReadUncommitted() SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.readCommitted = false })
}

// PartitionDiscovery sets the interval of partition discovery in unbounded
// mode (default 30s; 0 disables it).
func PartitionDiscovery(d time.Duration) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.discovery = d })
}

// OnMalformedRecord sets the error policy (default FailOnError).
func OnMalformedRecord(p ErrorPolicy) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.policy = p })
}

// MaxPollRecords caps the records of one fetch batch (default 2000).
func MaxPollRecords(n int) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.maxPollRecords = n })
}

// SourceClientOpts adds franz-go client options (TLS, SASL, …) to every
// client of the source. Default: none (plaintext, no authentication).
func SourceClientOpts(opts ...kgo.Opt) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.clientOpts = append(c.clientOpts, opts...) })
}

// SourceConnectTimeout bounds how long a reader or the enumerator goes on
// when it can reach no broker (default [DefaultConnectTimeout], 30s): no
// connection opens and no request is answered. A broker that cannot be
// reached is logged at once (WARN, naming host:port and node), again at
// most every 10s with how long it has been down, and a line is logged
// when it is back; once nothing could be reached for this long, the fetch
// or discovery fails with an *UnreachableError (ErrBrokersUnreachable)
// and the job restarts as its restart strategy says.
func SourceConnectTimeout(d time.Duration) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.connTimeout = d })
}

// SourceLogger sets the logger (default slog.Default()).
func SourceLogger(l *slog.Logger) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.logger = l })
}

// Source reads Kafka partitions, one split per partition. It implements
// source.Source[T, Split, EnumState].
type Source[T any] struct {
	cfg   sourceConfig
	deser Deserializer[T]
}

// NewSource returns a Kafka source for the brokers (host:port).
// Configuration errors wrap ErrInvalidConfig and name the option.
func NewSource[T any](brokers []string, deser Deserializer[T], opts ...SourceOption) (*Source[T], error) {
	cfg := defaultSourceConfig()
	cfg.brokers = slices.Clone(brokers)
	for _, o := range opts {
		o.apply(&cfg)
	}
	if deser == nil {
		return nil, fmt.Errorf("%w: source: deserializer is nil", ErrInvalidConfig)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Source[T]{cfg: cfg, deser: deser}, nil
}

// Boundedness is Bounded with [Bounded], else ContinuousUnbounded.
func (s *Source[T]) Boundedness() source.Boundedness {
	if s.cfg.bounded {
		return source.Bounded
	}
	return source.ContinuousUnbounded
}

// CreateEnumerator makes the enumerator for a fresh start.
func (s *Source[T]) CreateEnumerator(ctx source.EnumeratorContext[Split]) (source.Enumerator[Split, EnumState], error) {
	return newEnumerator(ctx, &s.cfg, nil), nil
}

// RestoreEnumerator makes the enumerator from a checkpoint.
func (s *Source[T]) RestoreEnumerator(ctx source.EnumeratorContext[Split], st EnumState) (source.Enumerator[Split, EnumState], error) {
	return newEnumerator(ctx, &s.cfg, &st), nil
}

// CreateReader makes the reader of one subtask.
func (s *Source[T]) CreateReader(ctx source.ReaderContext) (source.Reader[T, Split], error) {
	return newReader(ctx, &s.cfg, s.deser)
}

// SplitSerializer stores splits as JSON, version 1.
func (s *Source[T]) SplitSerializer() serde.Versioned[Split] { return splitSerde }

// EnumeratorStateSerializer stores the enumerator state as JSON, version 1.
func (s *Source[T]) EnumeratorStateSerializer() serde.Versioned[EnumState] { return enumSerde }
