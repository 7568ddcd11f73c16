package registry

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-io/sluice/connectors/kafka"
)

// The Kafka sink's producer and topic options, with Flink SQL's names
// where Flink has them (properties.* are the Kafka client's own names).
var kafkaSinkOptions = []Option{
	{Name: "topic-create", Type: Bool, Default: false,
		Description: "create the topic at start when it does not exist (with the topic-create.* options); false: a missing topic fails the job at start, without restarts, naming topic and brokers"},
	{Name: "topic-create.partitions", Type: Int, Default: int64(-1), Check: minusOneOrPositive(1 << 20),
		Description: "partitions of a topic the sink creates; -1 = the broker's num.partitions"},
	{Name: "topic-create.replication-factor", Type: Int, Default: int64(-1), Check: minusOneOrPositive(1 << 14),
		Description: "replication factor of a topic the sink creates; -1 = the broker's default.replication.factor"},
	{Name: "topic-create.configs", Type: Strings, Default: []string{}, Check: checkTopicConfigs,
		Description: "topic configs of a topic the sink creates, key=value items (a YAML list when a value holds a comma: cleanup.policy=compact,delete)"},
	{Name: "properties.compression.type", Type: Enum, Values: []string{"none", "gzip", "snappy", "lz4", "zstd"}, Default: "lz4",
		Description: "compression of produced batches; lz4: about half the broker CPU of none in our measurements (issue 15) at little producer cost"},
	{Name: "properties.linger.ms", Type: Int, Default: int64(5), Check: Between(0, 60_000),
		Description: "milliseconds the producer waits to fill a batch (Kafka's Java producer's default since 4.0); 0 sends at once (batches still form while a request is in flight). 5 ms: bigger batches, less CPU in sluice and in the broker per record when records come one by one from a transform (bench/kafka/README.md); an exactly-once sink flushes at each checkpoint anyway"},
	{Name: "properties.acks", Type: Enum, Values: []string{"all", "1", "0"},
		Description: "acknowledgements of a produce request (default all; 1 and 0 turn idempotence off and may duplicate or lose records); at-least-once only: exactly-once needs all"},
	{Name: "sink.delivery-guarantee", Type: Enum, Values: []string{string(ExactlyOnce), string(AtLeastOnce)},
		Description: "Flink's name of the pipeline's delivery (default: the pipeline's); sets it when the pipeline does not, must agree when it does"},
	{Name: "sink.transaction-timeout", Type: Duration, Default: 10 * time.Minute, Check: durationBetween(time.Second, 24*time.Hour),
		Description: "exactly-once: the producers' transaction timeout; at most the broker's transaction.max.timeout.ms (checked at start), more than the checkpoint interval plus a restart"},
	{Name: "sink.transaction-slots", Type: Int, Default: int64(5), Check: Between(2, 64),
		Description: "exactly-once: transactional ids per subtask, each reused once its checkpoint committed"},
	{Name: "sink.partitioner", Type: Enum, Values: []string{"default", "hash-key", "round-robin", "sticky"}, Default: "default",
		Description: "partition of each record: default = Kafka's (murmur2 of the key; records without a key stick to one partition per batch); hash-key = the same, Flink's name; round-robin = the next partition for each record; sticky = one partition per batch, keys ignored; not with a partition expression"},
	kafkaPropsOption(propProducer), // properties.*: kafkaprops.go
}

func minusOneOrPositive(hi int64) func(any) error {
	return func(v any) error {
		if n, ok := v.(int64); ok && n != -1 && (n < 1 || n > hi) {
			return fmt.Errorf("must be between 1 and %d, or -1 for the broker's default", hi)
		}
		return nil
	}
}

func durationBetween(lo, hi time.Duration) func(any) error {
	return func(v any) error {
		if d, ok := v.(time.Duration); ok && (d < lo || d > hi) {
			return fmt.Errorf("must be between %v and %v", lo, hi)
		}
		return nil
	}
}

// checkTopicConfigs checks key=value items without repeating them (a
// value may come from the environment).
func checkTopicConfigs(v any) error {
	items, _ := v.([]string)
	seen := map[string]bool{}
	for i, it := range items {
		k, _, ok := strings.Cut(it, "=")
		k = strings.TrimSpace(k)
		switch {
		case !ok || k == "":
			return fmt.Errorf("item %d: want key=value", i+1)
		case seen[k]:
			return fmt.Errorf("item %d: config %s given twice", i+1, k)
		}
		seen[k] = true
	}
	return nil
}

// kafkaSinkValidate refuses topic-create.* values that would have no
// effect because topic-create is off.
func kafkaSinkValidate(o Options) error {
	if o.Bool("topic-create") {
		return nil
	}
	off := errors.New("has no effect without topic-create: true")
	switch {
	case o.Has("topic-create.partitions") && o.Int("topic-create.partitions") != -1:
		return &OptionError{Option: "topic-create.partitions", Err: off}
	case o.Has("topic-create.replication-factor") && o.Int("topic-create.replication-factor") != -1:
		return &OptionError{Option: "topic-create.replication-factor", Err: off}
	case len(o.Strings("topic-create.configs")) > 0:
		return &OptionError{Option: "topic-create.configs", Err: off}
	}
	return nil
}

// kafkaSinkDelivery is the delivery sink.delivery-guarantee asks for.
func kafkaSinkDelivery(o Options) (Delivery, string) {
	return Delivery(o.String("sink.delivery-guarantee")), "sink.delivery-guarantee"
}

// kafkaSinkCheckDelivery refuses acks other than all for exactly-once.
func kafkaSinkCheckDelivery(d Delivery, o Options) error {
	if a := o.String("properties.acks"); d == ExactlyOnce && a != "" && a != "all" {
		return &OptionError{Option: "properties.acks", Err: fmt.Errorf("%s is not allowed with exactly-once delivery, which needs all (transactions are idempotent): remove it, or set delivery: at-least-once", a)}
	}
	return kafkaPropsCheckDelivery(d, o) // properties.*: kafkaprops.go
}

// kafkaSinkProducerOptions are the library options of kafkaSinkOptions
// (an option without a value, possible only for Options built by hand,
// keeps the library's default).
func kafkaSinkProducerOptions(c BuildContext) []kafka.SinkOption {
	o := c.Options
	var opts []kafka.SinkOption
	if o.Has("properties.compression.type") {
		opts = append(opts, kafka.ProducerCompression(kafka.Compression(o.String("properties.compression.type"))))
	}
	if o.Has("properties.linger.ms") {
		opts = append(opts, kafka.ProducerLinger(time.Duration(o.Int("properties.linger.ms"))*time.Millisecond))
	}
	if o.Has("sink.partitioner") && o.String("partition") == "" { // a partition expression partitions (sinkexpr.go)
		opts = append(opts, kafka.RecordPartitioner(kafka.Partitioner(o.String("sink.partitioner"))))
	}
	if o.Has("sink.transaction-timeout") {
		opts = append(opts, kafka.TransactionTimeout(o.Duration("sink.transaction-timeout")))
	}
	if o.Has("sink.transaction-slots") {
		opts = append(opts, kafka.TransactionSlots(int(o.Int("sink.transaction-slots"))))
	}
	if c.Delivery != ExactlyOnce {
		switch o.String("properties.acks") {
		case "all":
			opts = append(opts, kafka.ProducerAcks(kafka.AllAcks))
		case "1":
			opts = append(opts, kafka.ProducerAcks(kafka.LeaderAck))
		case "0":
			opts = append(opts, kafka.ProducerAcks(kafka.NoAck))
		}
	}
	if o.Bool("topic-create") {
		partitions, replication := int64(-1), int64(-1)
		if o.Has("topic-create.partitions") {
			partitions = o.Int("topic-create.partitions")
		}
		if o.Has("topic-create.replication-factor") {
			replication = o.Int("topic-create.replication-factor")
		}
		configs := map[string]string{}
		for _, it := range o.Strings("topic-create.configs") {
			k, v, _ := strings.Cut(it, "=")
			configs[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
		opts = append(opts, kafka.CreateTopic(int32(partitions), int16(replication), configs))
	}
	return opts
}
