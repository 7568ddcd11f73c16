package registry

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/kafka"
	"github.com/sluice-io/sluice/internal/format"
	"github.com/twmb/franz-go/pkg/kgo"
)

func testCodec(t *testing.T, name string) format.Codec {
	t.Helper()
	c, err := format.Builtin().New(name, format.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOwnedKafkaSer: a sink that owns its records produces a record a
// Kafka source read and nobody changed as the fetched record, retargeted;
// any change (value, metadata, another format) gets a fresh record.
func TestOwnedKafkaSer(t *testing.T) {
	raw, js := testCodec(t, "raw"), testCodec(t, "json")
	fetched := func() *kgo.Record {
		return &kgo.Record{Topic: "in", Partition: 2, Offset: 7, Key: []byte("k"), Value: []byte(`{"a":1}`),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}, Timestamp: time.UnixMilli(1000)}
	}
	var _ kafka.RecordSerializer[Record] = ownedKafkaSer{}
	for _, c := range []struct {
		name    string
		src, vc format.Codec
		change  func(Record) Record
		owned   bool
	}{
		{"raw", raw, raw, nil, true},
		{"json checked, passed through", js, js, nil, true},
		{"raw to json", raw, js, nil, false},
		{"value replaced", raw, raw, func(r Record) Record { return r.WithValue(map[string]any{"a": int64(1)}) }, false},
		{"key changed", raw, raw, func(r Record) Record { return r.WithKey([]byte("other")) }, false},
		{"decoded, bytes kept", js, js, func(r Record) Record { r, _ = r.Decode(context.Background()); return r }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			kr := fetched()
			r := KafkaRecord(kr, &Codecs{Value: c.src})
			if c.change != nil {
				r = c.change(r)
			}
			s := ownedKafkaSer{&kafkaSer{vc: c.vc, fmtName: "x", topic: "out"}}
			got, err := s.SerializeRecord(r)
			if err != nil {
				t.Fatal(err)
			}
			if !c.owned {
				if got != nil {
					t.Fatalf("got the fetched record; want nil (serialize a fresh one)")
				}
				if kr.Topic != "in" {
					t.Errorf("fetched record changed: topic %q", kr.Topic)
				}
				return
			}
			if got != kr || got.Topic != "out" || string(got.Key) != "k" || string(got.Value) != `{"a":1}` ||
				len(got.Headers) != 1 || got.Timestamp.UnixMilli() != 1000 {
				t.Fatalf("got %+v; want the fetched record with topic out", got)
			}
		})
	}
	t.Run("not from kafka", func(t *testing.T) {
		s := ownedKafkaSer{&kafkaSer{vc: raw, fmtName: "raw", topic: "out"}}
		if got, err := s.SerializeRecord(RawRecord([]byte("x"), &Codecs{Value: raw})); got != nil || err != nil {
			t.Fatalf("got %v, %v; want nil", got, err)
		}
	})
}
