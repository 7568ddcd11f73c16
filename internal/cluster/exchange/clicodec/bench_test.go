package clicodec_test

import (
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/exchange/clicodec"
	"github.com/sluice-io/sluice/internal/registry"
)

// BenchmarkCodec: a record as a Kafka source reads it (100 JSON bytes,
// key, one header, timestamp, topic/partition/offset, position), and one
// whose value a transform decoded into an object.
func BenchmarkCodec(b *testing.B) {
	js := newCodec(b, "json", nil)
	c := clicodec.New(js)
	val := []byte(`{"id":123456,"name":"some customer name","amount":12.5,"tags":["a","b"],"ts":"2026-12-02T01:00:00Z"}`)
	meta := registry.Meta{Key: []byte("customer-123456"), Headers: []registry.Header{{Key: "trace", Value: []byte("abc")}},
		Timestamp: time.Unix(1700000000, 0), Topic: "orders", Partition: 7, Offset: 123456789}
	raw := registry.WithPosition(registry.RawRecord(val, js).WithMeta(meta), registry.Position{Topic: "orders", Partition: 7, Offset: 123456789})
	decoded, err := raw.Decode(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	decoded = decoded.WithValue(decoded.Value())
	for _, bc := range []struct {
		name string
		r    registry.Record
	}{{"raw", raw}, {"decoded", decoded}} {
		enc, err := c.Append(nil, bc.r)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name+"/append", func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				buf, _ = c.Append(buf[:0], bc.r)
			}
			b.ReportMetric(float64(len(enc)), "bytes/record")
		})
		b.Run(bc.name+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Decode(enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
