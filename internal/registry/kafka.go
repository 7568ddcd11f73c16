package registry

import (
	"bytes"
	"context"
	"fmt"

	"github.com/sluice-io/sluice/connectors/kafka"
	"github.com/sluice-io/sluice/internal/format"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/serde/jsonrecord"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	MustRegisterSource(Source{
		Name:        "kafka",
		Description: "Reads records from Kafka topics (values in format, JSON objects by default; key, headers, timestamp, topic, partition and offset as meta), one split per partition (connectors/kafka).",
		Options: withKafkaSecurity(append(append([]Option{
			{Name: "brokers", Type: Strings, Required: true, Description: "bootstrap brokers, host:port"},
			{Name: "connect-timeout", Type: Duration, Default: kafka.DefaultConnectTimeout, Check: Positive,
				Description: "how long the brokers may be unreachable (no connection, no answer) before the source fails (then the job restarts per its restart strategy); an unreachable broker is logged at once (WARN, naming it), every 10s while it stays down, and when it is back"},
			{Name: "on-malformed", Type: Enum, Values: Policies, Default: string(PolicyFail), Description: "a value the format cannot decode (json: not a JSON object): fail fails the job at once (no restarts) naming topic, partition and offset; skip skips it, counted in numRecordsInErrors and logged; dead-letter sends it, with topic, partition and offset, to the pipeline's dead-letter sink"},
		}, kafkaSourceStartOptions...), formatOptions("format of the record keys, decoded when an expression reads meta.key: string (the default), raw (bytes), json, …")...)),
		Validate:    allValid(validateKafkaSource, validateKafkaSecurity, validateFormats),
		DeadLetters: func(o Options) bool { return Policy(o.String("on-malformed")) == PolicyDeadLetter },
		Build: func(c BuildContext) (stream.DataStream[Record], error) {
			opts, err := kafkaSourceStart(c.Options)
			if err != nil {
				return stream.DataStream[Record]{}, err
			}
			opts = append(opts, kafka.SourceLogger(c.Logger))
			sec, err := kafkaSecurity(c.Options, c.Logger)
			if err != nil {
				return stream.DataStream[Record]{}, err
			}
			opts = append(opts, kafka.SourceClientOpts(sec...))
			props, err := kafkaSourceProperties(c.Options) // properties.*: kafkaprops.go
			if err != nil {
				return stream.DataStream[Record]{}, err
			}
			opts = append(opts, props...)
			if d := c.Options.Duration("connect-timeout"); d > 0 {
				opts = append(opts, kafka.SourceConnectTimeout(d))
			}
			codecs, err := sourceCodecs(c.Options)
			if err != nil {
				return stream.DataStream[Record]{}, err
			}
			codecs.Lookup = c.LookupKeys
			vf, _ := valueFormat(c.Options)
			deser := kafkaRecords(codecs, vf, c.DecodeValues)
			switch Policy(c.Options.String("on-malformed")) {
			case PolicySkip:
				opts = append(opts, kafka.OnMalformedRecord(kafka.SkipOnError))
			case PolicyDeadLetter:
				deser = kafkaDeadLetters(deser, c.Name)
			default:
				deser = kafkaUnrecoverable(deser)
			}
			if !c.DecodeValues && codecs.Value.Identity() == "raw" {
				// Raw bytes nobody decodes are never malformed: no
				// check, no policy, one call per record.
				deser = rawRecords{codecs}
			}
			src, err := kafka.NewSource(c.Options.Strings("brokers"), deser, opts...)
			if err != nil {
				return stream.DataStream[Record]{}, err
			}
			return stream.FromSource(c.Env, src, watermark.None[Record](), c.Name, stream.UID(c.UID)), nil
		},
	})

	MustRegisterSink(Sink{
		Name:        "kafka",
		Description: "Writes records to a Kafka topic (values in format; key, headers and timestamp as read unless the key, headers, timestamp options set them); exactly-once with one transaction per checkpoint per subtask (connectors/kafka).",
		ExactlyOnce: true,
		Options: withKafkaSecurity(append(append(append([]Option{
			{Name: "brokers", Type: Strings, Required: true, Description: "bootstrap brokers, host:port"},
			{Name: "topic", Type: String, Required: true, Description: "topic to write"},
			{Name: "connect-timeout", Type: Duration, Default: kafka.DefaultConnectTimeout, Check: Positive,
				Description: "how long the brokers may be unreachable (no connection, no answer) before the sink fails (then the job restarts per its restart strategy); an unreachable broker is logged at once (WARN, naming it), every 10s while it stays down, and when it is back"},
			{Name: "transactional-id-prefix", Type: String, Default: "",
				Description: "prefix of the transactional ids (exactly-once); empty = sluice-<job id>-<sink name>, unique per job and stable across restores; a prefix set here must be unique among live jobs (a second job on it refuses to start)"},
		}, kafkaSinkOptions...), kafkaSinkExprOptions...), formatOptions("format of keys a key expression returns that are neither a string nor bytes (default string); keys as read, strings and bytes are written unchanged")...)), // kafkasink.go, kafkasec.go, sinkexpr.go, formatopts.go
		Validate:      allValid(kafkaSinkValidate, validateKafkaSecurity, validateFormats, validateSinkExprs),
		Step:          kafkaSinkStep,
		Delivery:      kafkaSinkDelivery,
		CheckDelivery: kafkaSinkCheckDelivery,
		Build: func(c BuildContext, in stream.DataStream[Record]) error {
			g := kafka.AtLeastOnce
			if c.Delivery == ExactlyOnce {
				g = kafka.ExactlyOnce
			}
			opts := []kafka.SinkOption{kafka.DefaultTopic(c.Options.String("topic")), kafka.DeliveryGuarantee(g),
				kafka.SinkLogger(c.Logger)}
			opts = append(opts, kafkaSinkProducerOptions(c)...)
			sec, err := kafkaSecurity(c.Options, c.Logger)
			if err != nil {
				return err
			}
			opts = append(opts, kafka.SinkClientOpts(sec...))
			props, err := kafkaSinkProperties(c.Options, c.Delivery) // properties.*: kafkaprops.go
			if err != nil {
				return err
			}
			opts = append(opts, props...)
			if d := c.Options.Duration("connect-timeout"); d > 0 {
				opts = append(opts, kafka.SinkConnectTimeout(d))
			}
			if prefix := c.Options.String("transactional-id-prefix"); prefix != "" {
				opts = append(opts, kafka.TransactionalIDPrefix(prefix))
			}
			name, opt := valueFormat(c.Options)
			vc, err := newCodec(c.Options, format.Value, name, opt)
			if err != nil {
				return err
			}
			kf := c.Options.String("key.format")
			if kf == "" {
				kf = "string"
			}
			kc, err := newCodec(c.Options, format.Key, kf, "key.format")
			if err != nil {
				return err
			}
			exprs, err := compileSinkExprs(c.Options)
			if err != nil {
				return err
			}
			if exprs.partition != nil {
				opts = append(opts, kafka.SinkClientOpts(kgo.RecordPartitioner(kgo.ManualPartitioner())))
			}
			var ser kafka.Serializer[Record] = &kafkaSer{vc: vc, fmtName: name, topic: c.Options.String("topic"), partition: exprs.partition != nil}
			if c.SinkOwnsRecords {
				ser = ownedKafkaSer{ser.(*kafkaSer)}
			}
			s, err := kafka.NewSink(c.Options.Strings("brokers"), ser, opts...)
			if err != nil {
				return err
			}
			if !c.StepApplied {
				in = exprs.addTo(in, c.Name, kc)
			}
			stream.SinkTo(in, s, c.Name, stream.UID(c.UID))
			return nil
		},
	})
}

// kafkaRecords makes a record of every Kafka record read, referencing it
// (its key, headers and timestamp are the record's metadata, its topic,
// partition and offset its position). With decode the value is decoded;
// without, it is only checked (checkValue), so that a malformed value is
// still the source's to handle.
//
// With c.Lookup set (and values JSON objects), the check is
// jsonrecord.LookupSpans — the same decision and error as the codec's
// check — and also finds those members (Record.Found), so that the first
// step scans nothing again.
func kafkaRecords(c *Codecs, name string, decode bool) kafka.Deserializer[Record] {
	lookup := !decode && len(c.Lookup) > 0 && len(c.Lookup) <= maxFound && c.Value.Identity() == "json-object"
	return kafka.DeserializerFunc[Record](func(rec *kgo.Record) (Record, error) {
		r := KafkaRecord(rec, c)
		var err error
		switch {
		case decode:
			r, err = r.Decode(context.Background())
		case lookup:
			var spans [maxFound][2]int
			sp := spans[:len(c.Lookup)]
			if err = jsonrecord.LookupSpans(rec.Value, c.Lookup, sp); err == nil {
				r.checked = true
				r.setFound(sp)
			}
		default:
			err = checkValue(context.Background(), c.Value, rec.Topic, rec.Value)
			r.checked = err == nil
		}
		if err != nil {
			return r, fmt.Errorf("%s: %w", name, err)
		}
		return r, nil
	})
}

// rawRecords is kafkaRecords for values that are passed through as raw
// bytes: a record referencing the Kafka record, never an error, nothing
// allocated.
type rawRecords struct{ c *Codecs }

func (d rawRecords) Deserialize(rec *kgo.Record) (Record, error) { return KafkaRecord(rec, d.c), nil }

// kafkaSer is the Kafka sink's serializer: kafkaSerialize with the sink's
// value codec, format name, topic and whether a partition expression
// partitions.
type kafkaSer struct {
	vc        format.Codec
	fmtName   string
	topic     string
	partition bool
}

func (s *kafkaSer) Serialize(r Record, kr *kgo.Record) error {
	return kafkaSerialize(s.vc, s.fmtName, s.topic, s.partition, r, kr)
}

// ownedKafkaSer is kafkaSer for a sink that owns its records
// (BuildContext.SinkOwnsRecords): a record a Kafka source read and that
// reaches the sink unchanged — its value's bytes written as read, its
// metadata the fetched record's own — is produced as the fetched
// *kgo.Record itself, its topic set to the sink's (the partitioner, or
// with a partition expression the record's own partition, places it),
// without a copy (kafka.RecordSerializer). Any other record is
// serialized into a fresh one.
type ownedKafkaSer struct{ *kafkaSer }

// SerializeRecord returns r's fetched record, retargeted, or nil.
func (s ownedKafkaSer) SerializeRecord(r Record) (*kgo.Record, error) {
	kr := r.kr
	if kr == nil || r.meta != nil {
		return nil, nil
	}
	b, ok := preEncodedFor(r, s.fmtName, s.topic)
	if !ok {
		var c format.Codec
		b, c, ok = r.Bytes()
		ok = ok && c.Identity() != "" && c.Identity() == s.vc.Identity()
	}
	if !ok || !sameBytes(b, kr.Value) {
		return nil, nil
	}
	kr.Topic = s.topic
	return kr, nil
}

// sameBytes reports whether a and b are the same bytes in memory (not
// merely equal): the record's value is the fetched record's.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// kafkaSerialize sets kr from r: the value encoded with vc (or r's bytes
// unchanged, see encodeValue), r's key, headers and timestamp, and with
// partition r's partition.
func kafkaSerialize(vc format.Codec, fmtName, topic string, partition bool, r Record, kr *kgo.Record) error {
	if b, ok := preEncodedFor(r, fmtName, topic); ok {
		kr.Value = b // encoded by the sink's step (kafkaSinkStep)
	} else {
		v, err := encodeValue(context.Background(), vc, topic, nil, r)
		if err != nil {
			return err
		}
		kr.Value = v
	}
	kr.Key = r.Key()
	kr.Headers = r.Headers()
	kr.Timestamp = r.Timestamp()
	if partition {
		kr.Partition = r.Partition()
	}
	return nil
}

// kafkaDeadLetters turns a value d cannot decode into a dead letter
// (MarkDeadLetter) with the topic and partition as split, the offset and
// the value's bytes, emitted at the record's offset: it is read exactly
// once like any record.

func kafkaDeadLetters(d kafka.Deserializer[Record], operator string) kafka.Deserializer[Record] {
	return kafka.DeserializerFunc[Record](func(r *kgo.Record) (Record, error) {
		v, err := d.Deserialize(r)
		if err == nil {
			return v, nil
		}
		return MarkDeadLetter(&DeadLetter{Error: fmt.Sprintf("%v: %v", kafka.ErrMalformedRecord, err), Operator: operator,
			Split: fmt.Sprintf("%s-%d", r.Topic, r.Partition), Offset: r.Offset, Raw: bytes.Clone(r.Value)}), nil
	})
}

// kafkaUnrecoverable marks d's errors as restart.ErrUnrecoverable: a
// value that cannot be decoded fails again after every restart.
func kafkaUnrecoverable(d kafka.Deserializer[Record]) kafka.Deserializer[Record] {
	return kafka.DeserializerFunc[Record](func(r *kgo.Record) (Record, error) {
		v, err := d.Deserialize(r)
		if err != nil {
			return v, unrecoverable{err}
		}
		return v, nil
	})
}

// unrecoverable is an error that reports itself as restart.ErrUnrecoverable
// without changing its message.
type unrecoverable struct{ error }

func (u unrecoverable) Unwrap() error        { return u.error }
func (u unrecoverable) Is(target error) bool { return target == restart.ErrUnrecoverable }

// allValid runs each validator in turn and returns the first error.
func allValid(vs ...func(Options) error) func(Options) error {
	return func(o Options) error {
		for _, v := range vs {
			if err := v(o); err != nil {
				return err
			}
		}
		return nil
	}
}
