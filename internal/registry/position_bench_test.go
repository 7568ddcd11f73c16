package registry

import (
	"testing"

	"github.com/sluice-io/sluice/connectors/kafka"
	"github.com/sluice-io/sluice/internal/format"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkKafkaRecords measures the CLI's Kafka deserializer: the record
// referencing the Kafka record (metadata and position, no allocation),
// with the value decoded (a transform reads it), checked only, or passed
// as bytes (raw, through the policy wrapper; raw-flat, the deserializer
// the source uses for raw values nobody decodes). Compare the ns/op.
func BenchmarkKafkaRecords(b *testing.B) {
	rec := &kgo.Record{Topic: "orders", Partition: 3, Offset: 123456,
		Value: []byte(`{"id":42,"user":"user-0042","event":"click","page":"/p/000042","score":4.2}`)}
	for _, c := range []struct {
		name, format string
		decode       bool
	}{{"decode", "json", true}, {"check", "json", false}, {"raw", "raw", false}, {"raw-flat", "raw", false}} {
		b.Run(c.name, func(b *testing.B) {
			v, err := format.Builtin().New(c.format, format.Config{})
			if err != nil {
				b.Fatal(err)
			}
			var d kafka.Deserializer[Record] = kafkaUnrecoverable(kafkaRecords(&Codecs{Value: v}, c.format, c.decode))
			if c.name == "raw-flat" {
				d = rawRecords{&Codecs{Value: v}}
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.Deserialize(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
