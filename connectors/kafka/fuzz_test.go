package kafka

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var fuzzValues = []string{
	bigRecord,
	`{"id":1}`,
	`{}`,
	`{"a":1,"a":2}`,
	"{\"s\":\"\xff\"}",
	`{"s":"\ud800"}`,
	`{"a":{"b":[{"c":1,"c":1}]}}`,
	`null`, `[1]`, `1`, `"s"`, `not json`, `{"a":`, ``,
	`{"f":1e400,"g":-0,"h":1E-7,"u":"\u00e9\u0000"}`,
	`{"id":1} {"id":2}`,
	"  {\"id\":1}\n",
}

// FuzzJSONDeserializer: any value decodes to an object or an error
// (never a panic or a hang); a decoded object written back
// by JSONSerializer decodes to the same object and writes back to the
// same bytes.
func FuzzJSONDeserializer(f *testing.F) {
	for _, v := range fuzzValues {
		f.Add([]byte(v))
	}
	d := JSONDeserializer[map[string]any]()
	ser := JSONSerializer[map[string]any]()
	f.Fuzz(func(t *testing.T, value []byte) {
		v, err := d.Deserialize(&kgo.Record{Value: value})
		if err != nil {
			return // the reader wraps it in ErrMalformedRecord with the position
		}
		if v == nil {
			t.Fatalf("%q: no error and a nil object", value)
		}
		var out kgo.Record
		if err := ser.Serialize(v, &out); err != nil {
			t.Fatalf("%q decoded to %v, which does not serialize: %v", value, v, err)
		}
		again, err := d.Deserialize(&kgo.Record{Value: out.Value})
		if err != nil {
			t.Fatalf("%q written back as %q, which does not decode: %v", value, out.Value, err)
		}
		if !reflect.DeepEqual(again, v) {
			t.Fatalf("%q → %v → %q → %v", value, v, out.Value, again)
		}
		var out2 kgo.Record
		if err := ser.Serialize(again, &out2); err != nil || !bytes.Equal(out2.Value, out.Value) {
			t.Fatalf("written back as %q, then as %q (%v)", out.Value, out2.Value, err)
		}
	})
}

// FuzzRecordDeserializer: any key, value and headers come back as they
// are, with topic, partition, offset and timestamp.
func FuzzRecordDeserializer(f *testing.F) {
	f.Add([]byte("k"), []byte(`{"id":1}`), "h", []byte("v"), int64(0), int32(0))
	f.Add([]byte(nil), []byte(nil), "", []byte(nil), int64(-1), int32(-1))
	f.Add([]byte("\xff"), []byte("\x00\x01"), "\xfe", []byte{0}, int64(1<<62), int32(1<<30))
	d := RecordDeserializer()
	f.Fuzz(func(t *testing.T, key, value []byte, hk string, hv []byte, off int64, part int32) {
		in := &kgo.Record{Topic: "t", Partition: part, Offset: off, Key: key, Value: value,
			Headers: []kgo.RecordHeader{{Key: hk, Value: hv}}, Timestamp: time.UnixMilli(off % (1 << 40))}
		r, err := d.Deserialize(in)
		if err != nil {
			t.Fatal(err)
		}
		if r.Topic != "t" || r.Partition != part || r.Offset != off || !bytes.Equal(r.Key, key) || !bytes.Equal(r.Value, value) ||
			len(r.Headers) != 1 || r.Headers[0].Key != hk || !bytes.Equal(r.Headers[0].Value, hv) || r.Timestamp != in.Timestamp.UnixMilli() {
			t.Fatalf("got %+v from %+v", r, in)
		}
	})
}
