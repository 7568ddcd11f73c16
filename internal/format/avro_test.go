package format

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

const userV1 = `{"type":"record","name":"User","namespace":"com.example","fields":[
 {"name":"id","type":"long"},
 {"name":"age","type":"int"},
 {"name":"score","type":"float"},
 {"name":"ratio","type":"double"},
 {"name":"name","type":"string"},
 {"name":"blob","type":"bytes"},
 {"name":"hash","type":{"type":"fixed","name":"Hash","size":4}},
 {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B"]}},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"attrs","type":{"type":"map","values":"long"}},
 {"name":"nick","type":["null","string"],"default":null},
 {"name":"either","type":["string","long"]},
 {"name":"address","type":{"type":"record","name":"Address","fields":[{"name":"zip","type":"int"},{"name":"city","type":"string","default":"Paris"}]}},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"atus","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
 {"name":"ok","type":"boolean"}
]}`

// userV2 adds an optional field (backward compatible).
const userV2 = `{"type":"record","name":"User","namespace":"com.example","fields":[
 {"name":"id","type":"long"},
 {"name":"email","type":["null","string"],"default":null}
]}`

const userV1Small = `{"type":"record","name":"User","namespace":"com.example","fields":[{"name":"id","type":"long"}]}`

func fullUser() map[string]any {
	return map[string]any{
		"id": int64(1) << 40, "age": int64(42), "score": 0.1, "ratio": 2.5, "name": "Zoé",
		"blob": []byte{0, 1, 2}, "hash": []byte("abcd"), "kind": "B",
		"tags": []any{"x", "y"}, "attrs": map[string]any{"a": int64(1), "b": int64(-2)},
		"nick": nil, "either": int64(7),
		"address": map[string]any{"zip": int64(75001), "city": "Lyon"},
		"at":      time.UnixMilli(1733011200123).UTC(), "atus": time.UnixMicro(1733011200123456).UTC(),
		"day": time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), "price": json.Number("-12.34"), "ok": true,
	}
}

func registryConfig(reg *srfake.Registry, schema string) *RegistryConfig {
	return &RegistryConfig{URLs: []string{reg.URL()}, Schema: schema}
}

func TestAvroRoundTrip(t *testing.T) {
	ctx := context.Background()
	reg := srfake.New()
	defer reg.Close()
	rc := registryConfig(reg, userV1)
	rc.AutoRegister = true
	c := newCodec(t, "avro", Config{Registry: rc})
	in := fullUser()
	b, err := c.Encode(ctx, "users", nil, in)
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != 0 {
		t.Fatalf("no magic byte: % x", b[:5])
	}
	got, err := c.Decode(ctx, "users", b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", got, in)
	}
	// The subject is the topic's value subject.
	cl, _ := sr.NewClient(sr.URLs(reg.URL()))
	ss, err := cl.SchemaByVersion(ctx, "users-value", -1)
	if err != nil {
		t.Fatal(err)
	}
	// The bytes are standard Avro: hamba/avro reads them.
	var generic map[string]any
	if err := avro.Unmarshal(avro.MustParse(userV1), b[5:], &generic); err != nil {
		t.Fatalf("hamba/avro cannot read our encoding: %v", err)
	}
	if generic["name"] != "Zoé" || generic["id"] != int64(1)<<40 {
		t.Fatalf("hamba/avro read %#v", generic)
	}
	// A reader (a second codec, another process) decodes by id, without a
	// schema of its own.
	reader := newCodec(t, "avro", Config{Registry: &RegistryConfig{URLs: []string{reg.URL()}}})
	got, err = reader.Decode(ctx, "users", b)
	if err != nil || !reflect.DeepEqual(got, in) {
		t.Fatalf("reader: %v %#v", err, got)
	}
	// A writer without a schema takes the latest under the subject.
	w := newCodec(t, "avro", Config{Registry: &RegistryConfig{URLs: []string{reg.URL()}}})
	b2, err := w.Encode(ctx, "users", nil, in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b, b2) || int(b2[4]) != ss.ID {
		t.Fatalf("latest-version writer wrote % x, want % x (id %d)", b2, b, ss.ID)
	}
	if c.Identity() != "" {
		t.Fatalf("identity %q", c.Identity())
	}
}

func TestAvroDecodesHambaEncoding(t *testing.T) {
	ctx := context.Background()
	reg := srfake.New()
	defer reg.Close()
	reg.SeedSchema("t-value", 1, 9, sr.Schema{Schema: `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"u","type":["null","string"]},{"name":"f","type":"float"}]}`})
	s := avro.MustParse(`{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"u","type":["null","string"]},{"name":"f","type":"float"}]}`)
	type R struct {
		A int     `avro:"a"`
		U *string `avro:"u"`
		F float32 `avro:"f"`
	}
	x := "hi"
	payload, err := avro.Marshal(s, R{A: -3, U: &x, F: 1.1})
	if err != nil {
		t.Fatal(err)
	}
	c := newCodec(t, "avro", Config{Registry: registryConfig(reg, "")})
	got, err := c.Decode(ctx, "t", append([]byte{0, 0, 0, 0, 9}, payload...))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": int64(-3), "u": "hi", "f": 1.1}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v want %#v", got, want)
	}
}

func TestAvroEvolution(t *testing.T) {
	ctx := context.Background()
	reg := srfake.New()
	defer reg.Close()
	rc := registryConfig(reg, userV1Small)
	rc.AutoRegister = true
	v1 := newCodec(t, "avro", Config{Registry: rc})
	old, err := v1.Encode(ctx, "u", nil, map[string]any{"id": int64(1)})
	if err != nil {
		t.Fatal(err)
	}
	rc2 := registryConfig(reg, userV2)
	rc2.AutoRegister = true
	v2 := newCodec(t, "avro", Config{Registry: rc2})
	// A record without the new field takes its default.
	newer, err := v2.Encode(ctx, "u", nil, map[string]any{"id": int64(2)})
	if err != nil {
		t.Fatal(err)
	}
	newest, err := v2.Encode(ctx, "u", nil, map[string]any{"id": int64(3), "email": "a@b"})
	if err != nil {
		t.Fatal(err)
	}
	if old[4] == newer[4] {
		t.Fatal("v1 and v2 have one id")
	}
	// One reader decodes records of both versions, each with its writer's
	// schema.
	reader := newCodec(t, "avro", Config{Registry: registryConfig(reg, "")})
	for b, want := range map[*[]byte]map[string]any{
		&old: {"id": int64(1)}, &newer: {"id": int64(2), "email": nil}, &newest: {"id": int64(3), "email": "a@b"},
	} {
		got, err := reader.Decode(ctx, "u", *b)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("decode: %v %#v, want %#v", err, got, want)
		}
	}
	// A writer without a schema that starts now writes v2.
	latest := newCodec(t, "avro", Config{Registry: registryConfig(reg, "")})
	b, err := latest.Encode(ctx, "u", nil, map[string]any{"id": int64(4)})
	if err != nil || b[4] != newer[4] {
		t.Fatalf("latest writer: %v, id %d want %d", err, b[4], newer[4])
	}
}

func TestAvroCoercion(t *testing.T) {
	ctx := context.Background()
	reg := srfake.New()
	defer reg.Close()
	rc := registryConfig(reg, userV1)
	rc.AutoRegister = true
	c := newCodec(t, "avro", Config{Registry: rc})
	in := fullUser()
	in["id"] = json.Number("1099511627776") // 2^40
	in["age"] = 42.0
	in["ratio"] = int64(3)
	in["score"] = json.Number("0.5")
	in["blob"] = "text"
	in["hash"] = "abcd"
	in["either"] = "s"
	in["nick"] = "n"
	in["at"] = "2024-12-01T00:00:00.123Z"
	in["atus"] = int64(5)
	in["day"] = "2026-12-01"
	in["price"] = 12.5
	delete(in["address"].(map[string]any), "city") // takes the default
	b, err := c.Encode(ctx, "t", nil, in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Decode(ctx, "t", b)
	if err != nil {
		t.Fatal(err)
	}
	m := got.(map[string]any)
	for k, want := range map[string]any{
		"id": int64(1) << 40, "age": int64(42), "ratio": 3.0, "score": 0.5, "blob": []byte("text"), "hash": []byte("abcd"),
		"either": "s", "nick": "n", "at": time.Date(2024, 12, 1, 0, 0, 0, 123e6, time.UTC), "atus": time.UnixMicro(5).UTC(),
		"day": time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), "price": json.Number("12.50"),
		"address": map[string]any{"zip": int64(75001), "city": "Paris"},
	} {
		if !reflect.DeepEqual(m[k], want) {
			t.Errorf("%s: got %#v want %#v", k, m[k], want)
		}
	}
}

func TestAvroErrors(t *testing.T) {
	ctx := context.Background()
	reg := srfake.New()
	defer reg.Close()
	rc := registryConfig(reg, userV1)
	rc.AutoRegister = true
	c := newCodec(t, "avro", Config{Registry: rc})
	enc := func(mod func(m map[string]any)) error {
		in := fullUser()
		mod(in)
		_, err := c.Encode(ctx, "t", nil, in)
		return err
	}
	wantErr(t, enc(func(m map[string]any) { m["address"].(map[string]any)["zip"] = int64(1) << 40 }), "field address.zip", "out of the int range")
	wantErr(t, enc(func(m map[string]any) { m["address"].(map[string]any)["zip"] = "x" }), "field address.zip", `"x" is not a number (want an int)`)
	wantErr(t, enc(func(m map[string]any) { delete(m, "name") }), "field name", "missing, and the schema gives no default")
	wantErr(t, enc(func(m map[string]any) { m["kind"] = "C" }), "field kind", `"C" is not one of the symbols`)
	wantErr(t, enc(func(m map[string]any) { m["tags"] = []any{"a", int64(1)} }), "field tags[1]", "want a string")
	wantErr(t, enc(func(m map[string]any) { m["attrs"] = map[string]any{"k": "v"} }), "field attrs.k", "want a long")
	wantErr(t, enc(func(m map[string]any) { m["extra"] = int64(1) }), "field extra", "not in the schema of record com.example.User")
	wantErr(t, enc(func(m map[string]any) { m["either"] = true }), "field either", "a boolean fits no branch of the union [string, long]")
	wantErr(t, enc(func(m map[string]any) { m["age"] = 1.5 }), "field age", "1.5 is not an integer")
	wantErr(t, enc(func(m map[string]any) { m["price"] = json.Number("1.234") }), "field price", "more than 2 decimal places")
	wantErr(t, enc(func(m map[string]any) { m["hash"] = []byte("abc") }), "field hash", "3 bytes for a fixed of 4")
	wantErr(t, enc(func(m map[string]any) { m["at"] = "yesterday" }), "field at", "not an RFC 3339 time")
	wantErr(t, enc(func(m map[string]any) { m["ratio"] = int64(1)<<53 + 1 }), "field ratio", "not exact as a 64-bit float")
	_, err := c.Encode(ctx, "t", nil, "x")
	wantErr(t, err, "the value", "want an object (record com.example.User)")

	// Decoding: no magic byte, an unknown id, truncated payloads.
	_, err = c.Decode(ctx, "t", []byte(`{"id":1}`))
	if !errors.Is(err, ErrWireFormat) {
		t.Fatalf("want ErrWireFormat, got %v", err)
	}
	wantErr(t, err, "magic byte 0", "0x7b")
	_, err = c.Decode(ctx, "t", []byte{0, 0, 0})
	wantErr(t, err, "shorter than the 5-byte header")
	_, err = c.Decode(ctx, "t", []byte{0, 0, 0, 0x30, 0x39, 2})
	if !errors.Is(err, ErrUnknownSchema) {
		t.Fatalf("want ErrUnknownSchema, got %v", err)
	}
	wantErr(t, err, "schema id 12345", reg.URL())
	good, err := c.Encode(ctx, "t", nil, fullUser())
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Decode(ctx, "t", good[:len(good)-3])
	wantErr(t, err, "avro format: schema id", "field")
	_, err = c.Decode(ctx, "t", append(good, 0))
	wantErr(t, err, "1 bytes left after the value")

	// Writing a schema that is not registered, without auto-register.
	look := newCodec(t, "avro", Config{Registry: registryConfig(reg, userV2)})
	_, err = look.Encode(ctx, "t", nil, map[string]any{"id": int64(1)})
	if !errors.Is(err, ErrUnknownSchema) {
		t.Fatalf("want ErrUnknownSchema, got %v", err)
	}
	wantErr(t, err, `subject "t-value"`, "auto-register")
	// No version under a subject.
	latest := newCodec(t, "avro", Config{Registry: registryConfig(reg, "")})
	_, err = latest.Encode(ctx, "nothing", nil, map[string]any{})
	wantErr(t, err, `the latest schema of subject "nothing-value"`, reg.URL())

	// A registry nobody answers at.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	d := newCodec(t, "avro", Config{Registry: &RegistryConfig{URLs: []string{dead}}})
	_, err = d.Decode(ctx, "t", good)
	wantErr(t, err, "schema id", dead)

	// Bad configurations.
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{}, "a schema registry URL is required"},
		{Config{Registry: &RegistryConfig{URLs: []string{dead}, Schema: "{"}}, "the configured schema"},
		{Config{Registry: &RegistryConfig{URLs: []string{dead}, SubjectStrategy: "nope"}}, `unknown subject strategy "nope"`},
		{Config{Registry: &RegistryConfig{URLs: []string{dead}, CAFile: "/nonexistent"}}, "TLS"},
	} {
		_, err := Builtin().New("avro", tc.c)
		wantErr(t, err, tc.want)
	}
}

func TestSubjectStrategies(t *testing.T) {
	ctx := context.Background()
	reg := srfake.New()
	defer reg.Close()
	for strategy, subject := range map[string]string{
		"": "orders-key", StrategyTopic: "orders-key", StrategyRecord: "com.example.User", StrategyTopicRecord: "orders-com.example.User",
	} {
		rc := registryConfig(reg, userV1Small)
		rc.AutoRegister, rc.SubjectStrategy = true, strategy
		c := newCodec(t, "avro", Config{Side: Key, Registry: rc})
		if _, err := c.Encode(ctx, "orders", nil, map[string]any{"id": int64(1)}); err != nil {
			t.Fatal(err)
		}
		cl, _ := sr.NewClient(sr.URLs(reg.URL()))
		if _, err := cl.SchemaByVersion(ctx, subject, -1); err != nil {
			t.Errorf("strategy %q: subject %q: %v", strategy, subject, err)
		}
	}
	rc := registryConfig(reg, userV1Small)
	rc.AutoRegister, rc.Subject = true, "explicit"
	if _, err := newCodec(t, "avro", Config{Registry: rc}).Encode(ctx, "orders", nil, map[string]any{"id": int64(1)}); err != nil {
		t.Fatal(err)
	}
	cl, _ := sr.NewClient(sr.URLs(reg.URL()))
	if _, err := cl.SchemaByVersion(ctx, "explicit", -1); err != nil {
		t.Error(err)
	}
	// The record strategies need the schema to know the record's name.
	c := newCodec(t, "avro", Config{Registry: &RegistryConfig{URLs: []string{reg.URL()}, SubjectStrategy: StrategyRecord}})
	_, err := c.Encode(ctx, "orders", nil, map[string]any{"id": int64(1)})
	wantErr(t, err, `subject strategy "record" needs the record's name`)
}

func TestAvroBasicAuth(t *testing.T) {
	ctx := context.Background()
	reg := srfake.New(srfake.WithAuth("Basic dTpw")) // u:p
	defer reg.Close()
	rc := registryConfig(reg, userV1Small)
	rc.AutoRegister = true
	_, err := newCodec(t, "avro", Config{Registry: rc}).Encode(ctx, "t", nil, map[string]any{"id": int64(1)})
	wantErr(t, err, "answered 401")
	rc.Username, rc.Password = "u", "p"
	if _, err := newCodec(t, "avro", Config{Registry: rc}).Encode(ctx, "t", nil, map[string]any{"id": int64(1)}); err != nil {
		t.Fatal(err)
	}
}

// FuzzAvroRead: arbitrary payloads never panic or run away, and what
// decodes re-encodes to the same bytes.
func FuzzAvroRead(f *testing.F) {
	schemas := []avro.Schema{
		avro.MustParse(userV1),
		avro.MustParse(`{"type":"record","name":"Z","fields":[{"name":"n","type":{"type":"array","items":"null"}},{"name":"m","type":{"type":"map","values":{"type":"record","name":"E","fields":[]}}}]}`),
	}
	f.Add(uint8(0), []byte{})
	f.Add(uint8(1), []byte{0x80, 0x80, 0x80, 0x80, 0x08, 0})
	f.Add(uint8(1), []byte{1, 2, 0, 0})
	f.Fuzz(func(t *testing.T, which uint8, payload []byte) {
		s := schemas[int(which)%len(schemas)]
		r := avroReader{b: payload}
		v, err := r.read(s, "")
		if err != nil || r.i != len(payload) {
			return
		}
		out, err := avroWrite(nil, s, v, "")
		if err != nil {
			t.Fatalf("decoded %#v does not re-encode: %v", v, err)
		}
		// Compared as bytes: NaN != NaN as values.
		r2 := avroReader{b: out}
		v2, err := r2.read(s, "")
		if err != nil {
			t.Fatalf("re-encoded %x does not decode: %v", out, err)
		}
		out2, err := avroWrite(nil, s, v2, "")
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("second round trip: %x, %v; want %x", out2, err, out)
		}
	})
}

func TestAvroZeroSizeItemsBounded(t *testing.T) {
	s := avro.MustParse(`{"type":"array","items":"null"}`)
	// Blocks of 2^24-1 nulls, over and over: a few bytes claiming
	// billions of items.
	var b []byte
	for range 100 {
		b = append(b, 0xfe, 0xff, 0xff, 0x0f) // zig-zag 2^24-1
	}
	r := avroReader{b: append(b, 0)}
	_, err := r.read(s, "")
	wantErr(t, err, "list items or map entries")
}

func BenchmarkAvro(b *testing.B) {
	ctx := context.Background()
	reg := srfake.New()
	defer reg.Close()
	schema := `{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"amount","type":"long"},{"name":"user","type":"string"},{"name":"ts","type":"long"},{"name":"tags","type":{"type":"array","items":"string"}},{"name":"price","type":"double"},{"name":"note","type":"string"}]}`
	c, err := Builtin().New("avro", Config{Registry: &RegistryConfig{URLs: []string{reg.URL()}, Schema: schema, AutoRegister: true}})
	if err != nil {
		b.Fatal(err)
	}
	v := map[string]any{"id": int64(123456), "amount": int64(731), "user": "user-6", "ts": int64(1733011200000), "tags": []any{"a", "b"}, "price": 12.5, "note": "café ok"}
	enc, err := c.Encode(ctx, "t", nil, v)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Decode(ctx, "t", enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Encode", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 256)
		for b.Loop() {
			if _, err := c.Encode(ctx, "t", buf[:0], v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestErrRegistry: a failed request to the registry (nothing listening, an
// unknown subject) wraps ErrRegistry, with the message unchanged; a value
// the schema cannot hold does not (a caller tells the record's fault from
// the registry's).
func TestErrRegistry(t *testing.T) {
	ctx := context.Background()
	c := newCodec(t, "avro", Config{Registry: &RegistryConfig{URLs: []string{"http://127.0.0.1:1"}, Schema: userV1Small, AutoRegister: true}})
	_, err := c.Encode(ctx, "users", nil, map[string]any{"id": int64(1)})
	if !errors.Is(err, ErrRegistry) || !strings.Contains(err.Error(), "http://127.0.0.1:1") {
		t.Errorf("unreachable registry: %v (want ErrRegistry, naming the URL)", err)
	}
	reg := srfake.New()
	defer reg.Close()
	c = newCodec(t, "avro", Config{Registry: registryConfig(reg, "")})
	if _, err = c.Encode(ctx, "users", nil, map[string]any{"id": int64(1)}); !errors.Is(err, ErrRegistry) || !errors.Is(err, ErrUnknownSchema) {
		t.Errorf("unknown subject: %v (want ErrRegistry and ErrUnknownSchema)", err)
	}
	rc := registryConfig(reg, userV1Small)
	rc.AutoRegister = true
	c = newCodec(t, "avro", Config{Registry: rc})
	if _, err = c.Encode(ctx, "users", nil, map[string]any{"id": "one"}); err == nil || errors.Is(err, ErrRegistry) {
		t.Errorf("a string in a long field: %v (want an error that is not ErrRegistry)", err)
	}
}
