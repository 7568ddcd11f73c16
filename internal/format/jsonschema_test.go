package format

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

const orderSchema = `{"title":"Order","type":"object","properties":{
 "id":{"type":"integer"},
 "amount":{"type":"number","minimum":0},
 "tags":{"type":"array","items":{"type":"string"}},
 "ship":{"$ref":"address.json"}
},"required":["id"],"additionalProperties":false}`

const addressSchema = `{"type":"object","properties":{"zip":{"type":"string","pattern":"^[0-9]{5}$"}},"required":["zip"]}`

func TestJSONSchema(t *testing.T) {
	ctx := context.Background()
	reg := srfake.New()
	defer reg.Close()
	reg.SeedSchema("address", 1, 1, sr.Schema{Schema: addressSchema, Type: sr.TypeJSON})
	reg.SeedSchema("orders-value", 1, 2, sr.Schema{Schema: orderSchema, Type: sr.TypeJSON,
		References: []sr.SchemaReference{{Name: "address.json", Subject: "address", Version: 1}}})
	c := newCodec(t, "json-schema", Config{Registry: registryConfig(reg, "")})
	in := map[string]any{"id": int64(12345678901234), "amount": json.Number("1.10"), "tags": []any{"a"}, "ship": map[string]any{"zip": "75001"}}
	b, err := c.Encode(ctx, "orders", nil, in)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[5:]) != `{"amount":1.10,"id":12345678901234,"ship":{"zip":"75001"},"tags":["a"]}` || b[4] != 2 {
		t.Fatalf("encoded % x %s", b[:5], b[5:])
	}
	got, err := c.Decode(ctx, "orders", b)
	if err != nil || !reflect.DeepEqual(got, in) {
		t.Fatalf("decode: %v %#v", err, got)
	}

	_, err = c.Encode(ctx, "orders", nil, map[string]any{"id": "x"})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("want ErrInvalid, got %v", err)
	}
	wantErr(t, err, "schema id 2", "at /id: keyword type")
	_, err = c.Encode(ctx, "orders", nil, map[string]any{"id": int64(1), "ship": map[string]any{"zip": "1"}})
	wantErr(t, err, "at /ship/zip: keyword pattern")
	_, err = c.Encode(ctx, "orders", nil, map[string]any{"amount": int64(-1)})
	wantErr(t, err, "at /: keyword required", "at /amount: keyword minimum")
	_, err = c.Decode(ctx, "orders", append([]byte{0, 0, 0, 0, 2}, `{"id":1,"x":2}`...))
	wantErr(t, err, "json-schema format: schema id 2", "keyword additionalProperties")
	_, err = c.Decode(ctx, "orders", append([]byte{0, 0, 0, 0, 2}, `{"id":1,"id":2}`...))
	wantErr(t, err, "duplicate key")
	_, err = c.Decode(ctx, "orders", []byte(`{"id":1}`))
	if !errors.Is(err, ErrWireFormat) {
		t.Fatalf("want ErrWireFormat, got %v", err)
	}
	_, err = c.Decode(ctx, "orders", []byte{0, 0, 0, 0, 99, '1'})
	wantErr(t, err, "schema id 99", "not found")

	// Evolution: v2 allows a new field; records of both versions decode.
	reg.SeedSchema("orders-value", 2, 3, sr.Schema{Schema: `{"title":"Order","type":"object","properties":{"id":{"type":"integer"},"note":{"type":"string"}},"required":["id"]}`, Type: sr.TypeJSON})
	w2 := newCodec(t, "json-schema", Config{Registry: registryConfig(reg, "")})
	b2, err := w2.Encode(ctx, "orders", nil, map[string]any{"id": int64(2), "note": "n"})
	if err != nil || b2[4] != 3 {
		t.Fatalf("v2 writer: %v % x", err, b2)
	}
	for _, x := range [][]byte{b, b2} {
		if _, err := c.Decode(ctx, "orders", x); err != nil {
			t.Fatal(err)
		}
	}
	// Registering with a configured schema, record strategy by title.
	rc := registryConfig(reg, `{"title":"com.example.Thing","type":"object"}`)
	rc.AutoRegister, rc.SubjectStrategy = true, StrategyRecord
	tc := newCodec(t, "json-schema", Config{Registry: rc})
	if _, err := tc.Encode(ctx, "x", nil, map[string]any{}); err != nil {
		t.Fatal(err)
	}
	cl, _ := sr.NewClient(sr.URLs(reg.URL()))
	if _, err := cl.SchemaByVersion(ctx, "com.example.Thing", -1); err != nil {
		t.Fatal(err)
	}
	_, err = Builtin().New("json-schema", Config{Registry: registryConfig(reg, `{"type":"nope"}`)})
	wantErr(t, err, "the configured schema", "invalid JSON Schema")
	// A $ref outside the references is not fetched.
	_, err = Builtin().New("json-schema", Config{Registry: registryConfig(reg, `{"$ref":"http://127.0.0.1:1/x.json"}`)})
	wantErr(t, err, "not a reference of the registered schema")
}
