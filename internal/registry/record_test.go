package registry

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/sluice-io/sluice/internal/format"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

func codec(t testing.TB, name string) format.Codec {
	t.Helper()
	c, err := format.Builtin().New(name, format.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRecordSize: a Record is passed by value through every operator; it
// stays small.
func TestRecordSize(t *testing.T) {
	if n := unsafe.Sizeof(Record{}); n > 96 {
		t.Errorf("Record is %d bytes, want at most 96", n)
	}
}

// TestRecordRawPathAllocs: reading a Kafka record as raw bytes, looking at
// its metadata and writing its bytes through a sink of the same format
// allocate nothing.
func TestRecordRawPathAllocs(t *testing.T) {
	raw := codec(t, "raw")
	cs := &Codecs{Value: raw}
	kr := &kgo.Record{Topic: "in", Partition: 2, Offset: 7, Key: []byte("k"), Value: []byte("\xff\x00v"),
		Timestamp: time.UnixMilli(1000), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}}
	deser := kafkaUnrecoverable(kafkaRecords(cs, "raw", false))
	var out kgo.Record
	n := testing.AllocsPerRun(200, func() {
		r, err := deser.Deserialize(kr)
		if err != nil {
			t.Fatal(err)
		}
		if r.Topic() != "in" || r.Partition() != 2 || r.Offset() != 7 || string(r.Key()) != "k" || len(r.Headers()) != 1 ||
			r.Timestamp().UnixMilli() != 1000 || !r.Pos().Known() || r.Decoded() {
			t.Fatal("metadata lost")
		}
		if err := kafkaSerialize(raw, "raw", "out", false, r, &out); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Errorf("%v allocations per record on the raw path, want 0", n)
	}
	if &out.Value[0] != &kr.Value[0] || string(out.Key) != "k" || out.Headers[0].Key != "h" || !out.Timestamp.Equal(kr.Timestamp) {
		t.Errorf("serialized %+v: want the input's bytes, key, headers and timestamp", out)
	}
}

// TestRecordDecodeAndPassThrough: a record keeps its bytes after Decode
// (a sink of the same Identity writes them unchanged), drops them when
// its value is replaced, and a sink of another format encodes the value.
func TestRecordDecodeAndPassThrough(t *testing.T) {
	js := codec(t, "json")
	in := []byte(`{"b": 1.0,  "a": "x"}`)
	r := KafkaRecord(&kgo.Record{Topic: "t", Value: in}, &Codecs{Value: js})
	if r.Decoded() || r.Value() != nil {
		t.Fatal("a raw record is decoded")
	}
	d, err := r.Decode(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := d.Object(); !ok || m["a"] != "x" {
		t.Fatalf("decoded %v", d.Value())
	}
	for _, x := range []Record{r, d} {
		b, err := encodeValue(t.Context(), js, "t", nil, x)
		if err != nil || !bytes.Equal(b, in) {
			t.Errorf("json → json: %q, %v; want the input bytes", b, err)
		}
	}
	b, err := encodeValue(t.Context(), codec(t, "raw"), "t", nil, d)
	if err == nil {
		t.Errorf("json object → raw: %q, want an error (an object is not bytes)", b)
	}
	changed := d.WithValue(map[string]any{"a": "y"})
	if _, _, ok := changed.Bytes(); ok {
		t.Error("a replaced value keeps its bytes")
	}
	if b, err := encodeValue(t.Context(), js, "t", nil, changed); err != nil || string(b) != `{"a":"y"}` {
		t.Errorf("changed value: %q, %v", b, err)
	}
	if changed.Topic() != "t" {
		t.Error("WithValue lost the metadata")
	}
	bad := KafkaRecord(&kgo.Record{Value: []byte("nope")}, &Codecs{Value: js})
	if _, err := bad.Decode(t.Context()); err == nil {
		t.Error("decoding malformed JSON: no error")
	}
	if _, err := kafkaRecords(&Codecs{Value: js}, "json", false).Deserialize(&kgo.Record{Value: []byte("nope")}); err == nil ||
		!strings.HasPrefix(err.Error(), "json: ") {
		t.Errorf("a malformed value not decoded: got %v, want a json: error (the source's on-malformed policy handles it)", err)
	}
}

// TestRecordMetaSetters: With… setters return a new record and leave the
// Kafka record it was read from unchanged.
func TestRecordMetaSetters(t *testing.T) {
	kr := &kgo.Record{Topic: "t", Partition: 1, Offset: 5, Key: []byte("k")}
	r := KafkaRecord(kr, &Codecs{Value: codec(t, "raw")})
	r2 := r.WithKey([]byte("k2")).WithHeaders([]Header{{Key: "a"}}).WithTimestamp(time.UnixMilli(9))
	if string(kr.Key) != "k" || string(r.Key()) != "k" || string(r2.Key()) != "k2" || r2.Topic() != "t" || r2.Offset() != 5 ||
		len(r2.Headers()) != 1 || r2.Timestamp().UnixMilli() != 9 {
		t.Errorf("setters: %+v / %+v", r.Meta(), r2.Meta())
	}
	if p := r2.Pos().Resolve(); p == nil || p.Topic != "t" || p.Offset != 5 {
		t.Errorf("position lost: %v", p)
	}
	if _, ok := DeadLetterOf(r2); ok {
		t.Error("a record passes for a dead letter")
	}
	d := &DeadLetter{Error: "x"}
	if got, ok := DeadLetterOf(MarkDeadLetter(d)); !ok || got != d || MarkDeadLetter(d).Value() != nil {
		t.Error("dead letter mark")
	}
}

// TestMetaInExpressions: meta reads the Kafka metadata (key decoded by
// the key format, string by default), is built only when read, and an
// unknown meta field is refused at compile time.
func TestMetaInExpressions(t *testing.T) {
	kr := &kgo.Record{Topic: "t", Partition: 1, Offset: 5, Key: []byte(`{"u": 3}`), Timestamp: time.UnixMilli(1234),
		Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("a")}, {Key: "h", Value: []byte("b")}}, Value: []byte(`{"id": 1}`)}
	r := KafkaRecord(kr, &Codecs{Value: codec(t, "json")})
	for src, want := range map[string]any{
		`meta.key`:          `{"u": 3}`,
		`meta.headers["h"]`: "b",
		`meta.topic + "/" + string(meta.partition) + "/" + string(meta.offset)`: "t/1/5",
		`meta.timestamp`:       int64(1234),
		`meta.path`:            nil,
		`meta.headers["none"]`: nil,
	} {
		e, err := CompileExpr(src, false)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if e.ReadsValue() || !e.ReadsMeta() {
			t.Errorf("%s: ReadsValue %v ReadsMeta %v", src, e.ReadsValue(), e.ReadsMeta())
		}
		got, err := e.Run(r) // undecoded: the value is not needed
		if err != nil || got != want {
			t.Errorf("%s: got %#v, %v; want %#v", src, got, err, want)
		}
	}
	withKey := KafkaRecord(kr, &Codecs{Value: codec(t, "json"), Key: codec(t, "json")})
	e, _ := CompileExpr(`meta.key.u`, false)
	if got, err := e.Run(withKey); err != nil || got != int64(3) {
		t.Errorf("meta.key with key.format json: %#v, %v", got, err)
	}
	e, _ = CompileExpr(`meta.key`, false)
	if got, err := e.Run(NewRecord(map[string]any{})); err != nil || got != nil {
		t.Errorf("meta.key without a key: %#v, %v", got, err)
	}
	if _, err := CompileExpr(`meta.kee == "x"`, true); err == nil || !strings.Contains(err.Error(), `meta has no field "kee"`) {
		t.Errorf("meta.kee: got %v", err)
	}
	if e, _ := CompileExpr(`id > 1`, true); !e.ReadsValue() || e.ReadsMeta() {
		t.Error("id > 1 reads the value and not meta")
	}
	fr := WithPosition(NewRecord(nil), Position{Split: "s", File: "in/a.jsonl", Offset: 42})
	e, _ = CompileExpr(`meta.path + ":" + string(meta.offset)`, false)
	if got, err := e.Run(fr); err != nil || got != "in/a.jsonl:42" {
		t.Errorf("file meta: %#v, %v", got, err)
	}
}

// TestSinkExpressions: the Kafka sink's key, headers, partition and
// timestamp expressions, their compile errors (at the option) and their
// run-time errors (naming the sink, the option and the position).
func TestSinkExpressions(t *testing.T) {
	opts := NewOptions(map[string]any{"key": `user`, "headers": `{"a": "x", "n": string(id), "b": meta.key}`,
		"partition": `id % 3`, "timestamp": `1000 + id`})
	e, err := compileSinkExprs(opts)
	if err != nil {
		t.Fatal(err)
	}
	if step, reads, err := kafkaSinkStep("out", opts); step == nil || !reads || err != nil {
		t.Errorf("Step: %v, %v, %v; want a step that reads the value", step != nil, reads, err)
	}
	if step, _, err := kafkaSinkStep("out", NewOptions(nil)); step != nil || err != nil {
		t.Errorf("Step without expressions: %v, %v; want none", step != nil, err)
	}
	kr := &kgo.Record{Topic: "in", Key: []byte("old"), Value: []byte(`{"id": 7, "user": "u7"}`)}
	r := KafkaRecord(kr, &Codecs{Value: codec(t, "json")})
	out, opt, err := e.apply(r, codec(t, "string"))
	if err != nil {
		t.Fatalf("%s: %v", opt, err)
	}
	var kr2 kgo.Record
	if err := kafkaSerialize(codec(t, "json"), "json", "out", true, out, &kr2); err != nil {
		t.Fatal(err)
	}
	hs := map[string]string{}
	for _, h := range kr2.Headers {
		hs[h.Key] = string(h.Value)
	}
	if string(kr2.Key) != "u7" || kr2.Partition != 1 || kr2.Timestamp.UnixMilli() != 1007 || hs["a"] != "x" || hs["n"] != "7" || hs["b"] != "old" ||
		string(kr2.Value) != `{"id": 7, "user": "u7"}` {
		t.Errorf("got key %q partition %d ts %d headers %v value %q", kr2.Key, kr2.Partition, kr2.Timestamp.UnixMilli(), hs, kr2.Value)
	}
	// A key that is neither string nor bytes is written in key.format.
	e, _ = compileSinkExprs(NewOptions(map[string]any{"key": `{"id": id}`}))
	if out, _, err := e.apply(r, codec(t, "json")); err != nil || string(out.Key()) != `{"id":7}` {
		t.Errorf("json key: %q, %v", out.Key(), err)
	}
	for o, src := range map[string]string{"key": "a +", "headers": "", "partition": "meta.nope", "timestamp": "1 +"} {
		if src == "" {
			continue
		}
		_, err := compileSinkExprs(NewOptions(map[string]any{o: src}))
		if oe, ok := errors.AsType[*OptionError](err); !ok || oe.Option != o {
			t.Errorf("%s: %q: got %v, want an *OptionError at %s", o, src, err, o)
		}
	}
	for o, src := range map[string]string{"partition": `"x"`, "timestamp": `"yesterday"`, "headers": `{"a": 1}`} {
		e, _ := compileSinkExprs(NewOptions(map[string]any{o: src}))
		if _, opt, err := e.apply(r, nil); err == nil || opt != o {
			t.Errorf("%s: %s: got %v at %q, want an error", o, src, err, opt)
		}
	}
	if err := validateSinkExprs(NewOptions(map[string]any{"partition": "id", "sink.partitioner": "round-robin"})); err == nil {
		t.Error("partition with sink.partitioner round-robin: no error")
	}
	se := &SinkExprError{Sink: "out", Option: "key", Pos: r.Pos().Resolve(), Err: errors.New("boom")}
	if !strings.Contains(se.Error(), `sink "out" option key at topic "in" partition 0 offset 0: boom`) {
		t.Errorf("error %q", se)
	}
}

// TestFormatOptions: a schema-registry format without
// schema-registry.url is refused at format's line (value.format's when
// that names it); format and value.format disagreeing are refused.
func TestFormatOptions(t *testing.T) {
	for m, want := range map[*map[string]any]string{
		{"format": "avro"}:                                                  "format",
		{"value.format": "protobuf"}:                                        "value.format",
		{"format": "json", "key.format": "json-schema"}:                     "key.format",
		{"format": "raw", "value.format": "string"}:                         "value.format",
		{"schema-registry.schema": "x", "schema-registry.schema-file": "y"}: "schema-registry.schema-file",
	} {
		err := validateFormats(NewOptions(*m))
		if oe, ok := errors.AsType[*OptionError](err); !ok || oe.Option != want {
			t.Errorf("%v: got %v, want an *OptionError at %s", *m, err, want)
		}
	}
	if err := validateFormats(NewOptions(map[string]any{"format": "avro", "schema-registry.url": []string{"http://127.0.0.1:1"}})); err != nil {
		t.Errorf("avro with a registry: %v", err)
	}
	_, err := newCodec(NewOptions(nil), format.Value, "nope", "format")
	if oe, ok := errors.AsType[*OptionError](err); !ok || oe.Option != "format" || !strings.Contains(err.Error(), "json, json-schema, protobuf, raw, string") {
		t.Errorf("unknown format: %v", err)
	}
}

// TestFormatConfigSides: every format.RegistryConfig field and
// ProtoMessage has an option; the subject, writer schema and Protobuf
// message of keys are the key.* options, never the values' (before, a key
// codec registered the value's schema under the value's subject).
func TestFormatConfigSides(t *testing.T) {
	dir := t.TempDir()
	vf, kf := filepath.Join(dir, "v.avsc"), filepath.Join(dir, "k.avsc")
	if err := os.WriteFile(vf, []byte(`"long"`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kf, []byte(`"string"`), 0o600); err != nil {
		t.Fatal(err)
	}
	o := NewOptions(map[string]any{
		"schema-registry.url": []string{"http://127.0.0.1:1"}, "schema-registry.subject": "vs", "schema-registry.schema-file": vf,
		"key.schema-registry.subject": "ks", "key.schema-registry.schema-file": kf,
		"protobuf.message": "V", "key.protobuf.message": "K",
		"schema-registry.tls.cert-file": "c.pem", "schema-registry.tls.key-file": "k.pem", "schema-registry.tls.insecure-skip-verify": true,
		"schema-registry.auto-register": true, "schema-registry.username": "u", "schema-registry.password": "p",
		"schema-registry.tls.ca-file": "ca.pem", "schema-registry.subject-strategy": "record",
	})
	v, err := formatConfig(o, format.Value)
	if err != nil {
		t.Fatal(err)
	}
	k, err := formatConfig(o, format.Key)
	if err != nil {
		t.Fatal(err)
	}
	want := format.RegistryConfig{URLs: []string{"http://127.0.0.1:1"}, SubjectStrategy: "record", Subject: "vs", Schema: `"long"`,
		AutoRegister: true, Username: "u", Password: "p", CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem", InsecureSkipVerify: true}
	if !reflect.DeepEqual(*v.Registry, want) || v.ProtoMessage != "V" {
		t.Errorf("value side: %+v %q, want %+v V", *v.Registry, v.ProtoMessage, want)
	}
	want.Subject, want.Schema = "ks", `"string"`
	if !reflect.DeepEqual(*k.Registry, want) || k.ProtoMessage != "K" {
		t.Errorf("key side: %+v %q, want %+v K", *k.Registry, k.ProtoMessage, want)
	}
	// Only the value's subject and schema set: keys use the strategy and
	// the latest version of their own subject.
	o = NewOptions(map[string]any{"schema-registry.url": []string{"http://127.0.0.1:1"}, "schema-registry.subject": "vs", "schema-registry.schema": `"long"`})
	if k, _ = formatConfig(o, format.Key); k.Registry.Subject != "" || k.Registry.Schema != "" {
		t.Errorf("key side took the value's subject %q or schema %q", k.Registry.Subject, k.Registry.Schema)
	}
	for m, want := range map[*map[string]any]string{
		{"key.schema-registry.schema": "x", "key.schema-registry.schema-file": "y"}: "key.schema-registry.schema-file",
		{"schema-registry.tls.cert-file": "c.pem"}:                                  "schema-registry.tls.cert-file",
		{"schema-registry.tls.key-file": "k.pem"}:                                   "schema-registry.tls.key-file",
	} {
		err := validateFormats(NewOptions(*m))
		if oe, ok := errors.AsType[*OptionError](err); !ok || oe.Option != want {
			t.Errorf("%v: got %v, want an *OptionError at %s", *m, err, want)
		}
	}
}

// TestKafkaSinkStepEncodes: with a schema-registry format the Kafka
// sink's step encodes the value, so a value the schema cannot hold is the
// step's *SinkExprError naming the option, the field and the record's
// position (before, the sink's writer failed without a position, and the
// job restarted for nothing); the sink writes the step's bytes; a
// registry that does not answer is left to the sink (no error from the
// step, which would dead-letter every record).
func TestKafkaSinkStepEncodes(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	schema := `{"type":"record","name":"U","fields":[{"name":"id","type":"long"}]}`
	o := NewOptions(map[string]any{"topic": "out", "format": "avro", "schema-registry.url": []string{reg.URL()},
		"schema-registry.schema": schema, "schema-registry.auto-register": true})
	step, reads, err := kafkaSinkStep("users", o)
	if err != nil || step == nil || !reads {
		t.Fatalf("step %v, reads %v, err %v", step != nil, reads, err)
	}
	rec := &kgo.Record{Topic: "in", Partition: 1, Offset: 7}
	bad := KafkaRecord(rec, nil).WithValue(map[string]any{"id": "one"})
	_, err = step(bad)
	se, ok := errors.AsType[*SinkExprError](err)
	if !ok || se.Option != "format" || !strings.Contains(err.Error(), "field id") || !strings.Contains(err.Error(), `topic "in" partition 1 offset 7`) {
		t.Fatalf("bad value: %v", err)
	}
	good, err := step(KafkaRecord(rec, nil).WithValue(map[string]any{"id": int64(3)}))
	if err != nil {
		t.Fatal(err)
	}
	b, ok := preEncodedFor(good, "avro", "out")
	if !ok || len(b) != 6 || b[0] != 0 || b[5] != 6 {
		t.Fatalf("step's bytes % x (%v)", b, ok)
	}
	var kr kgo.Record
	if err := kafkaSerialize(codec(t, "json"), "avro", "out", false, good, &kr); err != nil || !bytes.Equal(kr.Value, b) {
		t.Fatalf("sink wrote % x (%v), want the step's % x", kr.Value, err, b)
	}
	o = NewOptions(map[string]any{"topic": "out", "format": "avro", "schema-registry.url": []string{"http://127.0.0.1:1"},
		"schema-registry.schema": schema, "schema-registry.auto-register": true})
	step, _, _ = kafkaSinkStep("users", o)
	r := NewRecord(map[string]any{"id": int64(3)})
	if out, err := step(r); err != nil || out.hasRaw {
		t.Fatalf("unreachable registry: %v (bytes %v), want the record left to the sink", err, out.hasRaw)
	}
}

// TestKafkaSinkKeySubject: a key expression's value is encoded in
// key.format under the sink topic's key subject, <topic>-key (before, the
// key codec got no topic: the subject was "-key").
func TestKafkaSinkKeySubject(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	o := NewOptions(map[string]any{"topic": "users", "key": "{\"id\": id}", "key.format": "avro", "schema-registry.url": []string{reg.URL()},
		"key.schema-registry.schema": `{"type":"record","name":"K","fields":[{"name":"id","type":"long"}]}`, "schema-registry.auto-register": true})
	step, _, err := kafkaSinkStep("users", o)
	if err != nil || step == nil {
		t.Fatalf("step: %v", err)
	}
	if _, err := step(NewRecord(map[string]any{"id": int64(1)})); err != nil {
		t.Fatal(err)
	}
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	subjects, err := cl.Subjects(t.Context())
	if err != nil || !slices.Equal(subjects, []string{"users-key"}) {
		t.Fatalf("subjects %v (%v), want [users-key]", subjects, err)
	}
}
