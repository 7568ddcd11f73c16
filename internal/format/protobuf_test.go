package format

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
)

const commonProto = `syntax = "proto3";
package common;
message Money { string currency = 1; int64 units = 2; }
`

const orderProto = `syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "common.proto";
message Order {
  int64 id = 1;
  int32 qty = 2;
  uint64 big = 3;
  float f = 4;
  double d = 5;
  string note = 6;
  bytes blob = 7;
  enum Status { NEW = 0; PAID = 1; }
  Status status = 8;
  repeated string tags = 9;
  map<string, int64> counts = 10;
  google.protobuf.Timestamp at = 11;
  common.Money price = 12;
  optional string maybe = 13;
  oneof pay { string card = 14; int64 cash = 15; }
  repeated Line lines = 16;
  message Line { string sku = 1; sint32 n = 2; }
  bool ok = 17;
}
message Other { string x = 1; }
`

func seedOrder(reg *srfake.Registry) {
	reg.SeedSchema("common.proto", 1, 1, sr.Schema{Schema: commonProto, Type: sr.TypeProtobuf})
	reg.SeedSchema("orders-value", 1, 2, sr.Schema{Schema: orderProto, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "common.proto", Subject: "common.proto", Version: 1}}})
}

func TestProtobufRoundTrip(t *testing.T) {
	ctx := context.Background()
	reg := srfake.New()
	defer reg.Close()
	seedOrder(reg)
	c := newCodec(t, "protobuf", Config{Registry: registryConfig(reg, "")})
	in := map[string]any{
		"id": int64(1) << 40, "qty": int64(-3), "big": json.Number("18446744073709551615"), "f": 0.1, "d": 2.5,
		"note": "é", "blob": []byte{0, 255}, "status": "PAID", "tags": []any{"a", "b"},
		"counts": map[string]any{"x": int64(1)}, "at": time.Date(2026, 12, 1, 6, 30, 0, 5, time.UTC),
		"price": map[string]any{"currency": "EUR", "units": int64(12)}, "maybe": nil, "card": "visa", "cash": nil,
		"lines": []any{map[string]any{"sku": "s1", "n": int64(-1)}}, "ok": true,
	}
	b, err := c.Encode(ctx, "orders", nil, in)
	if err != nil {
		t.Fatal(err)
	}
	// Header: magic, id 2, the index shortcut 0 for the first message.
	if !reflect.DeepEqual(b[:6], []byte{0, 0, 0, 0, 2, 0}) {
		t.Fatalf("header % x", b[:6])
	}
	got, err := c.Decode(ctx, "orders", b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", got, in)
	}
	// The payload is standard Protobuf: dynamicpb reads it with a
	// descriptor compiled independently.
	fd, err := parseProto(ctx, sr.Schema{Schema: orderProto}, map[string]string{"common.proto": commonProto})
	if err != nil {
		t.Fatal(err)
	}
	msg := dynamicpb.NewMessage(fd.Messages().Get(0))
	if err := proto.Unmarshal(b[6:], msg); err != nil {
		t.Fatal(err)
	}
	if msg.Get(fd.Messages().Get(0).Fields().ByName("note")).String() != "é" {
		t.Fatal("note lost")
	}
	// Unset fields: defaults without presence, null with.
	b, err = c.Encode(ctx, "orders", nil, map[string]any{"id": int64(5)})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = c.Decode(ctx, "orders", b)
	m := got.(map[string]any)
	if m["qty"] != int64(0) || m["status"] != "NEW" || m["maybe"] != nil || m["price"] != nil || m["card"] != nil || !reflect.DeepEqual(m["tags"], []any{}) {
		t.Fatalf("defaults: %#v", m)
	}
}

func TestProtobufMessageIndex(t *testing.T) {
	ctx := context.Background()
	reg := srfake.New()
	defer reg.Close()
	seedOrder(reg)
	for name, want := range map[string][]byte{"Other": {2, 2}, "shop.Order.Line": {4, 0, 0}, "Line": {4, 0, 0}} {
		c := newCodec(t, "protobuf", Config{ProtoMessage: name, Registry: registryConfig(reg, "")})
		in := map[string]any{"x": "1"}
		if name != "Other" {
			in = map[string]any{"sku": "k", "n": int64(3)}
		}
		b, err := c.Encode(ctx, "orders", nil, in)
		if err != nil {
			t.Fatal(err)
		}
		// zig-zag: count 1 → 2, index 1 → 2; count 2 → 4, 0, 0.
		if !reflect.DeepEqual(b[5:5+len(want)], want) {
			t.Fatalf("%s: index bytes % x, want % x", name, b[5:5+len(want)], want)
		}
		// Any reader decodes by the index.
		got, err := newCodec(t, "protobuf", Config{Registry: registryConfig(reg, "")}).Decode(ctx, "orders", b)
		if err != nil || !reflect.DeepEqual(got, in) {
			t.Fatalf("%s: %v %#v", name, err, got)
		}
	}
	_, err := newCodec(t, "protobuf", Config{ProtoMessage: "Nope", Registry: registryConfig(reg, "")}).Encode(ctx, "orders", nil, map[string]any{})
	wantErr(t, err, `no message "Nope"`)
	_, err = newCodec(t, "protobuf", Config{Registry: registryConfig(reg, "")}).Decode(ctx, "orders", []byte{0, 0, 0, 0, 2, 2, 14})
	wantErr(t, err, "message index [7] names no message")
	_, err = newCodec(t, "protobuf", Config{Registry: registryConfig(reg, "")}).Decode(ctx, "orders", []byte{0, 0, 0, 0, 2})
	if !errors.Is(err, ErrWireFormat) {
		t.Fatalf("want ErrWireFormat, got %v", err)
	}
}

func TestProtobufEvolutionAndErrors(t *testing.T) {
	ctx := context.Background()
	reg := srfake.New()
	defer reg.Close()
	v1 := `syntax = "proto3"; package p; message M { int64 id = 1; }`
	v2 := `syntax = "proto3"; package p; message M { int64 id = 1; string email = 2; }`
	rc := registryConfig(reg, v1)
	rc.AutoRegister = true
	w1 := newCodec(t, "protobuf", Config{Registry: rc})
	old, err := w1.Encode(ctx, "m", nil, map[string]any{"id": int64(1)})
	if err != nil {
		t.Fatal(err)
	}
	rc2 := registryConfig(reg, v2)
	rc2.AutoRegister = true
	w2 := newCodec(t, "protobuf", Config{Registry: rc2})
	newer, err := w2.Encode(ctx, "m", nil, map[string]any{"id": int64(2), "email": "e"})
	if err != nil {
		t.Fatal(err)
	}
	r := newCodec(t, "protobuf", Config{Registry: registryConfig(reg, "")})
	for b, want := range map[*[]byte]map[string]any{&old: {"id": int64(1)}, &newer: {"id": int64(2), "email": "e"}} {
		got, err := r.Decode(ctx, "m", *b)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%v %#v want %#v", err, got, want)
		}
	}
	// Record strategy: the message's full name.
	rc3 := registryConfig(reg, v1)
	rc3.AutoRegister, rc3.SubjectStrategy = true, StrategyRecord
	if _, err := newCodec(t, "protobuf", Config{Registry: rc3}).Encode(ctx, "m", nil, map[string]any{"id": int64(1)}); err != nil {
		t.Fatal(err)
	}
	cl, _ := sr.NewClient(sr.URLs(reg.URL()))
	if _, err := cl.SchemaByVersion(ctx, "p.M", -1); err != nil {
		t.Fatal(err)
	}
	// Without a schema, a full ProtoMessage names the subject.
	rc4 := registryConfig(reg, "")
	rc4.SubjectStrategy = StrategyTopicRecord
	if _, err := newCodec(t, "protobuf", Config{ProtoMessage: "p.M", Registry: rc4}).Encode(ctx, "m", nil, map[string]any{"id": int64(1)}); err == nil {
		t.Fatal("subject m-p.M has no schema yet, but encoding worked")
	} else {
		wantErr(t, err, `subject "m-p.M"`)
	}
	rc4.SubjectStrategy = StrategyRecord
	if _, err := newCodec(t, "protobuf", Config{ProtoMessage: "p.M", Registry: rc4}).Encode(ctx, "m", nil, map[string]any{"id": int64(1)}); err != nil {
		t.Fatal(err)
	}

	reg2 := srfake.New()
	defer reg2.Close()
	seedOrder(reg2)
	c := newCodec(t, "protobuf", Config{Registry: registryConfig(reg2, "")})
	for _, tc := range []struct {
		in   map[string]any
		want []string
	}{
		{map[string]any{"qty": int64(1) << 40}, []string{"field qty", "out of the int32 range"}},
		{map[string]any{"big": int64(-1)}, []string{"field big", "negative"}},
		{map[string]any{"status": "GONE"}, []string{"field status", `"GONE" is not a value of enum shop.Order.Status (NEW, PAID)`}},
		{map[string]any{"lines": []any{map[string]any{"sku": int64(1)}}}, []string{"field lines[0].sku", "want a string"}},
		{map[string]any{"price": map[string]any{"cents": int64(1)}}, []string{"field price.cents", "not a field of message common.Money"}},
		{map[string]any{"at": "soon"}, []string{"field at", "not an RFC 3339 time"}},
		{map[string]any{"card": "visa", "cash": int64(1)}, []string{"field cash", "card and cash are both set, but oneof pay holds one"}},
		{map[string]any{"counts": map[string]any{"k": "v"}}, []string{"field counts.k", "want an int64"}},
	} {
		_, err := c.Encode(ctx, "orders", nil, tc.in)
		wantErr(t, err, tc.want...)
	}
	_, err = Builtin().New("protobuf", Config{Registry: registryConfig(reg, "syntax = \"proto3\"; message {")})
	wantErr(t, err, "the configured schema", "invalid Protobuf schema")
	_, err = c.Decode(ctx, "orders", []byte{0, 0, 0, 0, 2, 0, 0xff})
	wantErr(t, err, "schema id 2, message shop.Order")
}
