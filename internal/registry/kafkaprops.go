package registry

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/connectors/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The properties.* family of the Kafka source and sink: Flink passes any
// properties.<name> to the Java Kafka client; sluice talks to Kafka with
// franz-go, which has no property names, so the properties users set are
// mapped here to franz-go options, one by one, for the consumer (source)
// and the producer (sink). Any other property is refused at its line:
// none is ignored. Properties sluice has an option of its own for
// (properties.compression.type, properties.group.id, …, declared in
// kafkasrc.go and kafkasink.go) keep that option; those with another
// sluice option (transaction.timeout.ms → sink.transaction-timeout, ssl.*
// → tls.*) are refused naming it. docs/cli.md has the table.

const kafkaPropsPrefix = "properties."

// propSide is the Kafka client a property belongs to.
type propSide uint8

const (
	propConsumer propSide = 1 << iota // the source
	propProducer                      // the sink
	propBoth     = propConsumer | propProducer
)

func (s propSide) connector() string {
	if s == propConsumer {
		return "source"
	}
	return "sink"
}

func (s propSide) client() string {
	switch s {
	case propConsumer:
		return "consumer (kafka source)"
	case propProducer:
		return "producer (kafka sink)"
	}
	return "client"
}

// kafkaProp is one Java client property: mapped to franz-go (set), or
// refused pointing to the sluice option to use (option), or refused
// saying why it has no effect in sluice (why).
type kafkaProp struct {
	name  string
	side  propSide
	franz string // the franz-go option(s) it sets, for docs and tests
	doc   string // what it does here (docs/cli.md's table)

	set    func(b *propsBuild, v string) error
	option string
	why    string
}

// kafkaProps is the mapping, in the order of docs/cli.md's table.
var kafkaProps = []kafkaProp{
	// Both clients.
	{name: "client.id", side: propBoth, franz: "kgo.ClientID", doc: "the id the brokers log and quota the client by (default kgo); up to 256 characters",
		set: func(b *propsBuild, v string) error {
			if v == "" || len(v) > 256 {
				return errors.New("want 1 to 256 characters")
			}
			b.kgo = append(b.kgo, kgo.ClientID(v))
			return nil
		}},
	{name: "request.timeout.ms", side: propBoth, franz: "kgo.RequestTimeoutOverhead (sink: and kgo.ProduceRequestTimeout)",
		doc: "how long a request may take before its connection is cut and it is retried (100-900000; default 10000); the sink's produce requests also ask the broker to answer within it",
		set: func(b *propsBuild, v string) error {
			d, err := msRange(v, 100, 900_000)
			if err != nil {
				return err
			}
			b.kgo = append(b.kgo, kgo.RequestTimeoutOverhead(d))
			if b.side == propProducer {
				b.kgo = append(b.kgo, kgo.ProduceRequestTimeout(d))
			}
			return nil
		}},
	{name: "metadata.max.age.ms", side: propBoth, franz: "kgo.MetadataMaxAge", doc: "how often metadata (leaders, partitions) is refreshed at the latest (10-3600000; default 300000); below 5000 it also lowers kgo.MetadataMinAge to it",
		set: func(b *propsBuild, v string) error {
			d, err := msRange(v, 10, 3_600_000)
			if err != nil {
				return err
			}
			b.kgo = append(b.kgo, kgo.MetadataMaxAge(d))
			if d < 5*time.Second {
				b.kgo = append(b.kgo, kgo.MetadataMinAge(d))
			}
			return nil
		}},
	{name: "retry.backoff.ms", side: propBoth, franz: "kgo.RetryBackoffFn", doc: "first wait before a failed request (or connection) is retried, doubling at each retry up to retry.backoff.max.ms, ±20% jitter (0-600000; franz-go's default: 250ms doubling to 5s)",
		set: func(b *propsBuild, v string) error {
			d, err := msRange(v, 0, 600_000)
			b.backoff = &d
			return err
		}},
	{name: "retry.backoff.max.ms", side: propBoth, franz: "kgo.RetryBackoffFn", doc: "longest wait between retries (0-600000; default 1000 when only retry.backoff.ms is set, as in Java; at least retry.backoff.ms)",
		set: func(b *propsBuild, v string) error {
			d, err := msRange(v, 0, 600_000)
			b.backoffMax = &d
			return err
		}},
	{name: "socket.connection.setup.timeout.ms", side: propBoth, franz: "kgo.DialTimeout", doc: "how long opening a connection (TCP, TLS) may take (1-3600000; default 10000)",
		set: func(b *propsBuild, v string) error {
			d, err := msRange(v, 1, 3_600_000)
			b.kgo = append(b.kgo, kgo.DialTimeout(d))
			return err
		}},
	{name: "connections.max.idle.ms", side: propBoth, franz: "kgo.ConnIdleTimeout", doc: "an idle connection is closed after this (100-900000; default 30000; Java's 540000 fits)",
		set: func(b *propsBuild, v string) error {
			d, err := msRange(v, 100, 900_000)
			b.kgo = append(b.kgo, kgo.ConnIdleTimeout(d))
			return err
		}},

	// The consumer (source).
	{name: "client.rack", side: propConsumer, franz: "kgo.Rack", doc: "the rack the source runs in: brokers with a rack-aware replica selector serve its fetches from a replica in that rack (KIP-392); up to 512 characters",
		set: func(b *propsBuild, v string) error {
			if v == "" || len(v) > 512 {
				return errors.New("want 1 to 512 characters")
			}
			b.kgo = append(b.kgo, kgo.Rack(v))
			return nil
		}},
	{name: "fetch.min.bytes", side: propConsumer, franz: "kgo.FetchMinBytes", doc: "bytes a broker waits for (up to fetch.max.wait.ms) before it answers a fetch (0-2147483647; default 1)",
		set: func(b *propsBuild, v string) error {
			n, err := intRange(v, 0, math.MaxInt32)
			b.kgo = append(b.kgo, kgo.FetchMinBytes(int32(n)))
			return err
		}},
	{name: "fetch.max.bytes", side: propConsumer, franz: "kgo.FetchMaxBytes", doc: "most bytes of one fetch response (1-1073741824; default 52428800); above 50 MiB it also raises kgo.BrokerMaxReadBytes to twice it (at most 1 GiB). A batch larger than it is still returned",
		set: func(b *propsBuild, v string) error {
			n, err := intRange(v, 1, 1<<30)
			b.kgo = append(b.kgo, kgo.FetchMaxBytes(int32(n)))
			if n > 50<<20 {
				b.kgo = append(b.kgo, kgo.BrokerMaxReadBytes(int32(min(2*n, 1<<30))))
			}
			return err
		}},
	{name: "max.partition.fetch.bytes", side: propConsumer, franz: "kgo.FetchMaxPartitionBytes", doc: "most bytes of one partition in a fetch response (1-1073741824; default 1048576; at most fetch.max.bytes)",
		set: func(b *propsBuild, v string) error {
			n, err := intRange(v, 1, 1<<30)
			b.kgo = append(b.kgo, kgo.FetchMaxPartitionBytes(int32(n)))
			return err
		}},
	{name: "fetch.max.wait.ms", side: propConsumer, franz: "kgo.FetchMaxWait", doc: "how long a broker may hold a fetch waiting for fetch.min.bytes (10-300000; default 500, as in Java)",
		set: func(b *propsBuild, v string) error {
			d, err := msRange(v, 10, 300_000)
			b.kgo = append(b.kgo, kgo.FetchMaxWait(d))
			return err
		}},
	{name: "max.poll.records", side: propConsumer, franz: "kafka.MaxPollRecords (sluice)", doc: "most records a source reader takes from its client at once (1-1000000; default 2000)",
		set: func(b *propsBuild, v string) error {
			n, err := intRange(v, 1, 1_000_000)
			b.src = append(b.src, kafka.MaxPollRecords(int(n)))
			return err
		}},
	{name: "isolation.level", side: propConsumer, option: "properties.isolation.level"},
	{name: "group.id", side: propConsumer, option: "properties.group.id"},
	{name: "auto.offset.reset", side: propConsumer, option: "properties.auto.offset.reset"},
	{name: "enable.auto.commit", side: propConsumer, why: "the source commits the offsets of every checkpoint all sinks committed to properties.group.id; there is no auto-commit"},
	{name: "auto.commit.interval.ms", side: propConsumer, why: "the source commits offsets with the checkpoints (checkpoint.interval); there is no auto-commit"},
	{name: "session.timeout.ms", side: propConsumer, why: groupWhy},
	{name: "heartbeat.interval.ms", side: propConsumer, why: groupWhy},
	{name: "max.poll.interval.ms", side: propConsumer, why: groupWhy},
	{name: "group.instance.id", side: propConsumer, why: groupWhy},
	{name: "partition.assignment.strategy", side: propConsumer, why: groupWhy},
	{name: "group.protocol", side: propConsumer, why: groupWhy},

	// The producer (sink).
	{name: "batch.size", side: propProducer, franz: "kgo.ProducerBatchMaxBytes", doc: "most bytes of one partition's batch, before compression (512-1073741824; default 1000012; above 100 MiB without max.request.size it raises kgo.BrokerMaxWriteBytes to it). Unlike Java's, a hard limit: a record larger than it fails the job (Java sends it in a batch of its own)",
		set: func(b *propsBuild, v string) error {
			n, err := intRange(v, 512, 1<<30)
			b.batch = n
			b.kgo = append(b.kgo, kgo.ProducerBatchMaxBytes(int32(n)))
			return err
		}},
	{name: "max.request.size", side: propProducer, franz: "kgo.BrokerMaxWriteBytes", doc: "most bytes of one produce request (1024-1073741824; default 104857600); without batch.size, batches are capped at it too (franz-go's default batch is 1000012)",
		set: func(b *propsBuild, v string) error {
			n, err := intRange(v, 1024, 1<<30)
			b.request = n
			b.kgo = append(b.kgo, kgo.BrokerMaxWriteBytes(int32(n)))
			return err
		}},
	{name: "buffer.memory", side: propProducer, franz: "kgo.MaxBufferedBytes", doc: "most bytes of records buffered, not yet acknowledged, per producer; writing waits when it is reached (1-9223372036854775807; default unlimited: the sink bounds buffered records by count, max.buffered.records)",
		set: func(b *propsBuild, v string) error {
			n, err := intRange(v, 1, math.MaxInt64)
			b.kgo = append(b.kgo, kgo.MaxBufferedBytes(int(n)))
			return err
		}},
	{name: "max.buffered.records", side: propProducer, franz: "kafka.MaxBufferedRecords (sluice)", doc: "most records buffered, not yet acknowledged, per producer; writing waits when it is reached (1-1000000; default 10000, franz-go's)",
		set: func(b *propsBuild, v string) error {
			n, err := intRange(v, 1, 1_000_000)
			b.sink = append(b.sink, kafka.MaxBufferedRecords(int(n)))
			return err
		}},
	{name: "retries", side: propProducer, franz: "kgo.RecordRetries", doc: "how often a batch is retried before the write fails (0-2147483647; default unlimited); with the idempotent producer only where a retry is safe",
		set: func(b *propsBuild, v string) error {
			n, err := intRange(v, 0, math.MaxInt32)
			b.kgo = append(b.kgo, kgo.RecordRetries(int(n)))
			return err
		}},
	{name: "enable.idempotence", side: propProducer, franz: "kgo.DisableIdempotentWrite (false)", doc: "true (default) writes with the idempotent producer; false turns it off, for at-least-once only (a retry may write a record twice); true with properties.acks 1 or 0 is refused",
		set: func(b *propsBuild, v string) error {
			on, err := boolProp(v)
			b.idempotence = &on
			if err == nil && !on {
				b.kgo = append(b.kgo, kgo.DisableIdempotentWrite())
			}
			return err
		}},
	{name: "max.in.flight.requests.per.connection", side: propProducer, franz: "kgo.MaxProduceRequestsInflightPerBroker",
		doc: "produce requests in flight per broker (1-1000; default 1), only with the idempotent producer off (at-least-once with properties.enable.idempotence: false or properties.acks 1 or 0): the idempotent producer keeps up to 5, which franz-go does not let change",
		set: func(b *propsBuild, v string) error {
			n, err := intRange(v, 1, 1000)
			b.inflight = true
			b.kgo = append(b.kgo, kgo.MaxProduceRequestsInflightPerBroker(int(n)))
			return err
		}},
	{name: "acks", side: propProducer, option: "properties.acks"},
	{name: "compression.type", side: propProducer, option: "properties.compression.type"},
	{name: "linger.ms", side: propProducer, option: "properties.linger.ms"},
	{name: "transaction.timeout.ms", side: propProducer, option: "sink.transaction-timeout"},
	{name: "transactional.id", side: propProducer, option: "transactional-id-prefix"},
	{name: "partitioner.class", side: propProducer, option: "sink.partitioner"},
	{name: "delivery.timeout.ms", side: propProducer, why: "franz-go measures it from each record's timestamp, which the sink sets to the input record's; older input would fail at once. Delivery is bounded by each checkpoint's flush and, exactly-once, by sink.transaction-timeout"},

	// Settings sluice has options of its own for, on both sides.
	{name: "bootstrap.servers", side: propBoth, option: "brokers"},
	{name: "security.protocol", side: propBoth, option: "tls.enabled and sasl.mechanism (SSL = tls.enabled: true; SASL_SSL = both; SASL_PLAINTEXT = sasl.mechanism)"},
	{name: "sasl.mechanism", side: propBoth, option: "sasl.mechanism (without properties.)"},
	{name: "sasl.jaas.config", side: propBoth, option: "sasl.username and sasl.password (or sasl.password-file, sasl.token-file, sasl.token-command)"},
	{name: "ssl.truststore.location", side: propBoth, option: "tls.ca-file (PEM)"},
	{name: "ssl.keystore.location", side: propBoth, option: "tls.cert-file and tls.key-file (PEM)"},
	{name: "ssl.endpoint.identification.algorithm", side: propBoth, option: "tls.server-name (verification is always on), or tls.insecure-skip-verify for tests"},
	{name: "key.serializer", side: propProducer, option: "the sink's format options"},
	{name: "value.serializer", side: propProducer, option: "the sink's format options"},
	{name: "key.deserializer", side: propConsumer, option: "the source's format options"},
	{name: "value.deserializer", side: propConsumer, option: "the source's format options"},
}

const groupWhy = "the source does not join the consumer group: it assigns partitions itself (as Flink's KafkaSource does), and properties.group.id only names where offsets are committed; this setting would have no effect"

// propKeyError is a refusal of a property's name (not its value).
type propKeyError struct{ msg string }

func (e *propKeyError) Error() string        { return e.msg }
func (e *propKeyError) Is(target error) bool { return target == ErrKeyNotSupported }

func keyErrorf(format string, a ...any) error { return &propKeyError{fmt.Sprintf(format, a...)} }

// lookupKafkaProp returns the mapped property name (without the prefix)
// for side, or an error saying why it is not accepted.
func lookupKafkaProp(side propSide, name string) (kafkaProp, error) {
	i := slices.IndexFunc(kafkaProps, func(p kafkaProp) bool { return p.name == name })
	if i < 0 {
		switch {
		case strings.HasPrefix(name, "ssl."):
			return kafkaProp{}, keyErrorf("use the tls.* options (tls.enabled, tls.ca-file, tls.cert-file, tls.key-file, tls.server-name): sluice uses franz-go, not the Java client")
		case strings.HasPrefix(name, "sasl."):
			return kafkaProp{}, keyErrorf("use the sasl.* options (sasl.mechanism, sasl.username, sasl.password, sasl.password-file, sasl.token-file, sasl.token-command): sluice uses franz-go, not the Java client")
		}
		return kafkaProp{}, keyErrorf("unknown Kafka client property: sluice uses franz-go, not the Java client, and maps these %s properties: %s (docs/cli.md, \"Kafka client properties\")",
			side.client(), strings.Join(kafkaPropNames(side), ", "))
	}
	p := kafkaProps[i]
	switch {
	case p.side&side == 0:
		return kafkaProp{}, keyErrorf("%s is a %s property; the kafka %s does not take it", name, (propBoth &^ side).client(), side.connector())
	case p.option != "":
		return kafkaProp{}, keyErrorf("use %s", p.option)
	case p.why != "":
		return kafkaProp{}, keyErrorf("not supported: %s", p.why)
	}
	return p, nil
}

// kafkaPropNames are the properties mapped for side, sorted.
func kafkaPropNames(side propSide) []string {
	var out []string
	for _, p := range kafkaProps {
		if p.set != nil && p.side&side != 0 {
			out = append(out, p.name)
		}
	}
	slices.Sort(out)
	return out
}

// kafkaPropsOption is the properties.* family of a side.
func kafkaPropsOption(side propSide) Option {
	return Option{Name: kafkaPropsPrefix + "*", Type: String,
		Description: fmt.Sprintf("Kafka %s settings under their Java client names, mapped to franz-go options (docs/cli.md, Kafka client properties): %s; any other is refused; default: none set (franz-go's defaults)",
			side.client(), strings.Join(kafkaPropNames(side), ", ")),
		CheckKey: func(key, value string) error {
			p, err := lookupKafkaProp(side, strings.TrimPrefix(key, kafkaPropsPrefix))
			if err != nil {
				return err
			}
			return p.set(&propsBuild{side: side}, value)
		}}
}

// propsBuild collects what the properties of one connector set.
type propsBuild struct {
	side propSide
	kgo  []kgo.Opt
	src  []kafka.SourceOption
	sink []kafka.SinkOption

	backoff, backoffMax *time.Duration
	batch, request      int64 // batch.size, max.request.size (0: not set)
	idempotence         *bool
	inflight            bool
}

// buildKafkaProps maps the properties.* of o for side. Its errors are
// *OptionError naming the property and never repeat a value.
func buildKafkaProps(side propSide, o Options) (*propsBuild, error) {
	b := &propsBuild{side: side}
	for _, kv := range o.Prefixed(kafkaPropsPrefix) {
		p, err := lookupKafkaProp(side, strings.TrimPrefix(kv.Key, kafkaPropsPrefix))
		if err == nil {
			err = p.set(b, kv.Value)
		}
		if err != nil {
			return nil, &OptionError{Option: kv.Key, Err: err}
		}
	}
	if b.backoff != nil || b.backoffMax != nil {
		base, hi := 100*time.Millisecond, time.Second // Java's defaults
		if b.backoff != nil {
			base = *b.backoff
		}
		if b.backoffMax != nil {
			hi = *b.backoffMax
		}
		b.kgo = append(b.kgo, kgo.RetryBackoffFn(retryBackoff(base, max(hi, base))))
	}
	switch {
	case b.request > 0 && b.batch == 0 && b.request < 1000012:
		// franz-go refuses a batch larger than a request.
		b.kgo = append(b.kgo, kgo.ProducerBatchMaxBytes(int32(b.request)))
	case b.request == 0 && b.batch > 100<<20:
		b.kgo = append(b.kgo, kgo.BrokerMaxWriteBytes(int32(b.batch)))
	}
	return b, nil
}

// retryBackoff is Java's exponential backoff (KIP-580): base doubling at
// each retry up to hi, with ±20% jitter.
func retryBackoff(base, hi time.Duration) func(int) time.Duration {
	return func(fails int) time.Duration {
		d := base
		for i := 1; i < fails && d < hi; i++ {
			d *= 2
		}
		d = min(d, hi)
		return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
	}
}

// checkProducer checks the producer properties against the delivery and
// properties.acks ("" = all).
func (b *propsBuild) checkProducer(d Delivery, acks string) error {
	key := func(n string) string { return kafkaPropsPrefix + n }
	weak := acks == "1" || acks == "0"
	if b.idempotence != nil {
		switch {
		case !*b.idempotence && d == ExactlyOnce:
			return &OptionError{Option: key("enable.idempotence"), Err: errors.New("false is not allowed with exactly-once delivery, which writes through (idempotent) transactions: remove it, or set delivery: at-least-once")}
		case *b.idempotence && weak:
			return &OptionError{Option: key("enable.idempotence"), Err: fmt.Errorf("true needs properties.acks: all (the idempotent producer waits for every in-sync replica), not %s: remove one of them", acks)}
		}
	}
	idempotent := d == ExactlyOnce || !weak && (b.idempotence == nil || *b.idempotence)
	if b.inflight && idempotent {
		return &OptionError{Option: key("max.in.flight.requests.per.connection"), Err: errors.New("can be set only with the idempotent producer off: it keeps up to 5 requests in flight per broker, which franz-go does not let change; for at-least-once, set properties.enable.idempotence: false (or properties.acks: 1), or remove it")}
	}
	if b.batch > 0 && b.request > 0 && b.batch > b.request {
		return &OptionError{Option: key("batch.size"), Err: errors.New("must not be more than properties.max.request.size")}
	}
	return nil
}

// kafkaSourceProperties are the library options of the source's
// properties.* (appended to the source's options by its Build).
func kafkaSourceProperties(o Options) ([]kafka.SourceOption, error) {
	b, err := buildKafkaProps(propConsumer, o)
	if err != nil {
		return nil, err
	}
	opts := b.src
	if len(b.kgo) > 0 {
		opts = append(opts, kafka.SourceClientOpts(b.kgo...))
	}
	return opts, nil
}

// kafkaSinkProperties are the library options of the sink's properties.*
// for delivery d (appended to the sink's options by its Build).
func kafkaSinkProperties(o Options, d Delivery) ([]kafka.SinkOption, error) {
	b, err := buildKafkaProps(propProducer, o)
	if err != nil {
		return nil, err
	}
	if err := b.checkProducer(d, o.String("properties.acks")); err != nil {
		return nil, err
	}
	opts := b.sink
	if len(b.kgo) > 0 {
		opts = append(opts, kafka.SinkClientOpts(b.kgo...))
	}
	return opts, nil
}

// kafkaPropsCheckDelivery is the sink's CheckDelivery part for its
// properties.*: the rules across properties, acks and the delivery.
func kafkaPropsCheckDelivery(d Delivery, o Options) error {
	_, err := kafkaSinkProperties(o, d)
	return err
}

func intRange(v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("want an integer from %d to %d", lo, hi)
	}
	return n, nil
}

func msRange(v string, lo, hi int64) (time.Duration, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("want milliseconds, an integer from %d to %d", lo, hi)
	}
	return time.Duration(n) * time.Millisecond, nil
}

func boolProp(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errors.New("want true or false")
}
