package registry

import (
	"testing"

	"github.com/sluice-io/sluice/connectors/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkKafkaPositions measures what attaching a Kafka record's
// position costs the CLI's deserializer (kafkaPositions: the topic,
// partition and offset the record has anyway, one allocation, no
// formatting), against decoding alone. Compare the ns/op of the two.
func BenchmarkKafkaPositions(b *testing.B) {
	rec := &kgo.Record{Topic: "orders", Partition: 3, Offset: 123456,
		Value: []byte(`{"id":42,"user":"user-0042","event":"click","page":"/p/000042","score":4.2}`)}
	plain := kafka.JSONDeserializer[Record]()
	for _, c := range []struct {
		name string
		d    kafka.Deserializer[Record]
	}{{"decode", kafkaUnrecoverable(plain)}, {"decode+position", kafkaUnrecoverable(kafkaPositions(plain))}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.d.Deserialize(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
