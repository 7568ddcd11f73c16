package format

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// Every codec accepts what every other produces: JSON lines → Avro → JSON
// gives the input back byte for byte, and CSV rows (all strings) → Avro
// or Protobuf → CSV give the rows back.
func TestCodecsAcceptEachOther(t *testing.T) {
	ctx := context.Background()
	reg := srfake.New()
	defer reg.Close()
	const schema = `{"type":"record","name":"E","fields":[
	 {"name":"amount","type":"double"},{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
	 {"name":"id","type":"long"},{"name":"note","type":["null","string"],"default":null},
	 {"name":"ok","type":"boolean"},{"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
	 {"name":"tags","type":{"type":"array","items":"string"}}]}`
	rc := registryConfig(reg, schema)
	rc.AutoRegister = true
	av := newCodec(t, "avro", Config{Registry: rc})
	js := newCodec(t, "json", Config{})
	for _, line := range []string{
		`{"amount":12.5,"at":"2024-12-01T00:00:00.123Z","id":9007199254740993,"note":null,"ok":true,"price":1.10,"tags":["a"]}`,
		`{"amount":-0.1,"at":"1970-01-01T00:00:00Z","id":-1,"note":"é \"q\"","ok":false,"price":-3.00,"tags":[]}`,
	} {
		v, err := js.Decode(ctx, "f", []byte(line))
		if err != nil {
			t.Fatal(err)
		}
		b, err := av.Encode(ctx, "t", nil, v)
		if err != nil {
			t.Fatal(err)
		}
		back, err := av.Decode(ctx, "t", b)
		if err != nil {
			t.Fatal(err)
		}
		out, err := js.Encode(ctx, "f", nil, back)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != line {
			t.Fatalf("json → avro → json:\n got %s\nwant %s", out, line)
		}
	}

	cols := []string{"id", "amount", "ok", "at", "note"}
	csv := newCodec(t, "csv", Config{CSVColumns: cols})
	const csvSchema = `{"type":"record","name":"C","fields":[{"name":"id","type":"int"},{"name":"amount","type":"float"},{"name":"ok","type":"boolean"},{"name":"at","type":{"type":"long","logicalType":"timestamp-micros"}},{"name":"note","type":["null","string"]}]}`
	rc2 := registryConfig(reg, csvSchema)
	rc2.AutoRegister = true
	av2 := newCodec(t, "avro", Config{Registry: rc2})
	const proto = `syntax = "proto3"; message C { int32 id = 1; float amount = 2; bool ok = 3; string at = 4; optional string note = 5; }`
	rc3 := registryConfig(reg, proto)
	rc3.AutoRegister = true
	pb := newCodec(t, "protobuf", Config{Registry: rc3})
	for _, row := range []string{`7,0.1,true,2024-12-01T00:00:00.000001Z,"a,b"`, `-7,1e3,false,1970-01-01T00:00:00Z,`} {
		v, err := csv.Decode(ctx, "f", []byte(row))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []Codec{av2, pb} {
			b, err := c.Encode(ctx, "csv", nil, v)
			if err != nil {
				t.Fatal(err)
			}
			back, err := c.Decode(ctx, "csv", b)
			if err != nil {
				t.Fatal(err)
			}
			out, err := csv.Encode(ctx, "f", nil, back)
			if err != nil {
				t.Fatal(err)
			}
			// Numbers come back as numbers (1e3 → 1000); everything
			// else as it was.
			want := strings.Replace(row, "1e3", "1000", 1)
			if string(out) != want {
				t.Fatalf("csv → %T → csv:\n got %s\nwant %s", c, out, want)
			}
		}
	}
	_, err := av2.Encode(ctx, "csv", nil, map[string]any{"id": "x", "amount": "1", "ok": "true", "at": "1970-01-01T00:00:00Z"})
	wantErr(t, err, "field id", `"x" is not a number (want an int)`)
	_, err = av2.Encode(ctx, "csv", nil, map[string]any{"id": "1", "amount": "1", "ok": "yes", "at": "1970-01-01T00:00:00Z"})
	wantErr(t, err, "field ok", `"yes" is not true or false`)
	_, err = av2.Encode(ctx, "csv", nil, map[string]any{"id": "1", "amount": "NaN", "ok": "true", "at": "1970-01-01T00:00:00Z"})
	wantErr(t, err, "field amount", `"NaN" is not a number`)
}
