package kafka

import (
	"encoding/json"
	"fmt"

	"github.com/sluice-io/sluice/serde/jsonrecord"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Serializer turns a value into the record the sink produces: it sets at
// least Value, and may set Key, Headers, Timestamp and Topic (a per-record
// topic; when Topic is left empty the sink's [Topic] is used). The record
// passed in is fresh for every call.
type Serializer[T any] interface {
	Serialize(v T, r *kgo.Record) error
}

// SerializerFunc adapts a function to a [Serializer].
type SerializerFunc[T any] func(v T, r *kgo.Record) error

// Serialize calls f(v, r).
func (f SerializerFunc[T]) Serialize(v T, r *kgo.Record) error { return f(v, r) }

// RecordSerializer is an optional interface of a [Serializer] for values
// that carry a record to produce as it is (a record a Kafka source
// fetched, passed through): the sink produces the returned record itself
// instead of a fresh one that Serialize fills, so nothing is copied or
// allocated per record.
//
// SerializeRecord returns the record to produce for v, with Topic set to
// the output topic (or "" for the sink's [DefaultTopic]) and Key, Value,
// Headers and Timestamp as they are to be written (a zero Timestamp gets
// the value's event time, as with Serialize); or nil, and the sink calls
// Serialize with a fresh record. The sink owns a returned record from
// then on: franz-go sets its Partition (unless the partitioner is
// manual), Timestamp (truncated to milliseconds), Offset, producer id and
// epoch, Attrs and Context, from the producer's goroutines, until its
// produce promise has run. So return a record only when nothing else
// reads or changes it after the call — not the source that fetched it
// (the Kafka source reads nothing of a record after emitting it), not
// another operator, not a later retry — and never the same record twice.
type RecordSerializer[T any] interface {
	Serializer[T]
	SerializeRecord(v T) (*kgo.Record, error)
}

// BytesSerializer writes byte slices as record values.
func BytesSerializer() Serializer[[]byte] { return bytesSerializer{} }

type bytesSerializer struct{}

func (bytesSerializer) Serialize(v []byte, r *kgo.Record) error { r.Value = v; return nil }

// StringSerializer writes strings as record values.
func StringSerializer() Serializer[string] {
	return SerializerFunc[string](func(v string, r *kgo.Record) error { r.Value = []byte(v); return nil })
}

// JSONSerializer writes values as JSON record values.
func JSONSerializer[T any]() Serializer[T] {
	return SerializerFunc[T](func(v T, r *kgo.Record) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("kafka: json serialize %T: %w", v, err)
		}
		r.Value = b
		return nil
	})
}

// KeyValueSerializer writes records with key and value from two functions.
func KeyValueSerializer[T any](key, value func(T) ([]byte, error)) Serializer[T] {
	return SerializerFunc[T](func(v T, r *kgo.Record) error {
		var err error
		if key != nil {
			if r.Key, err = key(v); err != nil {
				return fmt.Errorf("kafka: serialize key: %w", err)
			}
		}
		if r.Value, err = value(v); err != nil {
			return fmt.Errorf("kafka: serialize value: %w", err)
		}
		return nil
	})
}

// Record is a consumed Kafka record with its coordinates, as delivered by
// [RecordDeserializer].
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []kgo.RecordHeader
	// Timestamp is the record's timestamp in milliseconds since the epoch.
	Timestamp int64
}

// Deserializer turns a consumed record into a value. An error makes the
// record malformed: the source's [ErrorPolicy] decides what happens, and the
// error reported names topic, partition and offset.
type Deserializer[T any] interface {
	Deserialize(r *kgo.Record) (T, error)
}

// DeserializerFunc adapts a function to a [Deserializer].
type DeserializerFunc[T any] func(r *kgo.Record) (T, error)

// Deserialize calls f(r).
func (f DeserializerFunc[T]) Deserialize(r *kgo.Record) (T, error) { return f(r) }

// BytesDeserializer delivers record values. The slice is the record's own
// (not copied); nothing is allocated per record.
func BytesDeserializer() Deserializer[[]byte] { return bytesDeserializer{} }

// bytesDeserializer is BytesDeserializer: a method, not a closure, so that
// the source's per-record call is one indirect call.
type bytesDeserializer struct{}

func (bytesDeserializer) Deserialize(r *kgo.Record) ([]byte, error) { return r.Value, nil }

// StringDeserializer delivers record values as strings.
func StringDeserializer() Deserializer[string] {
	return DeserializerFunc[string](func(r *kgo.Record) (string, error) { return string(r.Value), nil })
}

// JSONDeserializer decodes record values as JSON into T with
// [jsonrecord.Unmarshal], the decoder of the file connector's JSON lines:
// into map[string]any or any numbers are exact (int64, float64, or
// json.Number where a float64 would change them, so [JSONSerializer] writes
// them back byte for byte), and a value that encoding/json would rewrite
// silently — invalid UTF-8, a key repeated in one object, null, or a
// non-object where T is a map or a struct — is malformed like invalid JSON:
// the source's [ErrorPolicy] applies, and the error names topic, partition
// and offset.
func JSONDeserializer[T any]() Deserializer[T] {
	return DeserializerFunc[T](func(r *kgo.Record) (T, error) {
		var v T
		if err := jsonrecord.Unmarshal(r.Value, &v); err != nil {
			var zero T
			return zero, fmt.Errorf("json: %w", err)
		}
		return v, nil
	})
}

// RecordDeserializer delivers the whole record: key, value, headers,
// timestamp and coordinates.
func RecordDeserializer() Deserializer[Record] {
	return DeserializerFunc[Record](func(r *kgo.Record) (Record, error) {
		return Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value,
			Headers: r.Headers, Timestamp: r.Timestamp.UnixMilli()}, nil
	})
}
