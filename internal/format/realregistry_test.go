package format

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// realRegistry returns $SLUICE_SCHEMA_REGISTRY (a Confluent-compatible
// API root, e.g. Apicurio Registry's http://127.0.0.1:PORT/apis/ccompat/v7,
// started by scripts/schema-registry.sh) or skips the test.
func realRegistry(t *testing.T) string {
	t.Helper()
	u := strings.TrimRight(os.Getenv("SLUICE_SCHEMA_REGISTRY"), "/")
	if u == "" {
		t.Skip("SLUICE_SCHEMA_REGISTRY is not set: start a real schema registry with `eval \"$(scripts/schema-registry.sh start)\"` to run this test")
	}
	return u
}

// uniqueTopic names a topic (and so the subjects) no other test run uses:
// every package's tests share one registry.
func uniqueTopic(t *testing.T) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer("/", "_").Replace(t.Name()) + "-" + hex.EncodeToString(b[:])
}

func TestRealRegistryAvro(t *testing.T) {
	url := realRegistry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := uniqueTopic(t)
	const v1 = `{"type":"record","name":"Event","namespace":"sluice.test","fields":[{"name":"id","type":"long"},{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}}]}`
	const v2 = `{"type":"record","name":"Event","namespace":"sluice.test","fields":[{"name":"id","type":"long"},{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},{"name":"note","type":["null","string"],"default":null}]}`
	// A schema that is not registered cannot be looked up.
	look := newCodec(t, "avro", Config{Registry: &RegistryConfig{URLs: []string{url}, Schema: v1}})
	_, err := look.Encode(ctx, topic, nil, map[string]any{"id": int64(1), "at": time.UnixMilli(1).UTC()})
	wantErr(t, err, "schema not found in the registry", "auto-register")

	w1 := newCodec(t, "avro", Config{Registry: &RegistryConfig{URLs: []string{url}, Schema: v1, AutoRegister: true}})
	at := time.UnixMilli(1733011200123).UTC()
	old, err := w1.Encode(ctx, topic, nil, map[string]any{"id": int64(1), "at": at})
	if err != nil {
		t.Fatal(err)
	}
	// Now the lookup finds it, with the same id.
	b, err := newCodec(t, "avro", Config{Registry: &RegistryConfig{URLs: []string{url}, Schema: v1}}).Encode(ctx, topic, nil, map[string]any{"id": int64(1), "at": at})
	if err != nil || !reflect.DeepEqual(b, old) {
		t.Fatalf("lookup: %v % x want % x", err, b, old)
	}
	// v2 (a new optional field, backward compatible) registers under the
	// same subject; records of both versions decode.
	w2 := newCodec(t, "avro", Config{Registry: &RegistryConfig{URLs: []string{url}, Schema: v2, AutoRegister: true}})
	newer, err := w2.Encode(ctx, topic, nil, map[string]any{"id": int64(2), "at": at, "note": "n"})
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(old[:5], newer[:5]) {
		t.Fatal("v1 and v2 share an id")
	}
	r := newCodec(t, "avro", Config{Registry: &RegistryConfig{URLs: []string{url}}})
	for b, want := range map[*[]byte]map[string]any{
		&old: {"id": int64(1), "at": at}, &newer: {"id": int64(2), "at": at, "note": "n"},
	} {
		got, err := r.Decode(ctx, topic, *b)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("decode: %v %#v want %#v", err, got, want)
		}
	}
	// A writer without a schema takes the latest version: v2.
	latest, err := newCodec(t, "avro", Config{Registry: &RegistryConfig{URLs: []string{url}}}).Encode(ctx, topic, nil, map[string]any{"id": int64(3), "at": at})
	if err != nil || !reflect.DeepEqual(latest[:5], newer[:5]) {
		t.Fatalf("latest: %v % x want id % x", err, latest, newer[:5])
	}
	// An incompatible schema is refused by the registry (BACKWARD).
	bad := `{"type":"record","name":"Event","namespace":"sluice.test","fields":[{"name":"id","type":"string"}]}`
	_, err = newCodec(t, "avro", Config{Registry: &RegistryConfig{URLs: []string{url}, Schema: bad, AutoRegister: true}}).Encode(ctx, topic, nil, map[string]any{"id": "x"})
	wantErr(t, err, "registering the schema", url, "409")
	// An unknown id.
	_, err = r.Decode(ctx, topic, []byte{0, 0x7f, 0xff, 0xff, 0xf0, 2})
	wantErr(t, err, "schema id 2147483632", "schema not found in the registry", url)
}

func TestRealRegistryProtobufAndJSONSchema(t *testing.T) {
	url := realRegistry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := uniqueTopic(t)
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	// A Protobuf schema with a reference, registered by hand as a
	// producer of another stack would.
	common := "common-" + topic + ".proto"
	if _, err := cl.RegisterSchema(ctx, common, sr.Schema{Schema: commonProto, Type: sr.TypeProtobuf}, -1, -1); err != nil {
		t.Fatal(err)
	}
	order := strings.Replace(orderProto, `import "common.proto";`, `import "`+common+`";`, 1)
	if _, err := cl.RegisterSchema(ctx, topic+"-value", sr.Schema{Schema: order, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: common, Subject: common, Version: 1}}}, -1, -1); err != nil {
		t.Fatal(err)
	}
	pc := newCodec(t, "protobuf", Config{Registry: &RegistryConfig{URLs: []string{url}}})
	in := map[string]any{"id": int64(7), "status": "PAID", "price": map[string]any{"currency": "EUR", "units": int64(3)}, "lines": []any{map[string]any{"sku": "a", "n": int64(2)}}}
	b, err := pc.Encode(ctx, topic, nil, in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := newCodec(t, "protobuf", Config{Registry: &RegistryConfig{URLs: []string{url}}}).Decode(ctx, topic, b)
	if err != nil {
		t.Fatal(err)
	}
	m := got.(map[string]any)
	if m["id"] != int64(7) || m["status"] != "PAID" || !reflect.DeepEqual(m["price"], in["price"]) || !reflect.DeepEqual(m["lines"], in["lines"]) {
		t.Fatalf("protobuf decode %#v", m)
	}

	// JSON Schema, auto-registered under the record strategy (its title).
	title := "sluice.test." + strings.ReplaceAll(topic, "-", "_")
	js := `{"title":"` + title + `","type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`
	jc := newCodec(t, "json-schema", Config{Registry: &RegistryConfig{URLs: []string{url}, Schema: js, AutoRegister: true, SubjectStrategy: StrategyRecord}})
	b, err = jc.Encode(ctx, topic, nil, map[string]any{"id": int64(1)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.SchemaByVersion(ctx, title, -1); err != nil {
		t.Fatalf("subject %q: %v", title, err)
	}
	got, err = newCodec(t, "json-schema", Config{Registry: &RegistryConfig{URLs: []string{url}}}).Decode(ctx, topic, b)
	if err != nil || !reflect.DeepEqual(got, map[string]any{"id": int64(1)}) {
		t.Fatalf("json-schema decode: %v %#v", err, got)
	}
	_, err = jc.Encode(ctx, topic, nil, map[string]any{"id": "x"})
	wantErr(t, err, "at /id: keyword type")
}
