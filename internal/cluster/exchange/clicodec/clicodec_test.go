package clicodec_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/exchange"
	"github.com/sluice-io/sluice/internal/cluster/exchange/clicodec"
	"github.com/sluice-io/sluice/internal/format"
	"github.com/sluice-io/sluice/internal/registry"
)

var _ exchange.Codec[registry.Record] = (*clicodec.Codec)(nil)

func newCodec(t testing.TB, name string, key format.Codec) *registry.Codecs {
	t.Helper()
	c, err := format.Builtin().New(name, format.Config{AnyJSON: true})
	if err != nil {
		t.Fatal(err)
	}
	return &registry.Codecs{Value: c, Key: key}
}

// sameRecord reports how got differs from want as the CLI sees records:
// their values, bytes, metadata, positions and dead letters.
func sameRecord(want, got registry.Record) error {
	if dw, ok := registry.DeadLetterOf(want); ok {
		dg, ok := registry.DeadLetterOf(got)
		if !ok {
			return errors.New("not a dead letter")
		}
		if !reflect.DeepEqual(dw, dg) {
			return fmt.Errorf("dead letter %+v, want %+v", dg, dw)
		}
		return nil
	}
	wb, wc, wok := want.Bytes()
	gb, gc, gok := got.Bytes()
	if wok != gok || !bytes.Equal(wb, gb) || (wok && wc.Identity() != gc.Identity()) {
		return fmt.Errorf("bytes %q (%v), want %q (%v)", gb, gok, wb, wok)
	}
	if want.Checked() != got.Checked() {
		return fmt.Errorf("checked %v, want %v", got.Checked(), want.Checked())
	}
	if !wok && !equalValue(want.Value(), got.Value()) {
		return fmt.Errorf("value %#v, want %#v", got.Value(), want.Value())
	}
	wm, gm := want.Meta(), got.Meta()
	if !wm.Timestamp.Equal(gm.Timestamp) {
		return fmt.Errorf("timestamp %v, want %v", gm.Timestamp, wm.Timestamp)
	}
	wm.Timestamp, gm.Timestamp = time.Time{}, time.Time{}
	if !reflect.DeepEqual(wm, gm) {
		return fmt.Errorf("meta %+v, want %+v", gm, wm)
	}
	if w, g := want.Pos().Resolve(), got.Pos().Resolve(); !reflect.DeepEqual(w, g) {
		return fmt.Errorf("position %+v, want %+v", g, w)
	}
	if want.Key() == nil != (got.Key() == nil) || want.Topic() != got.Topic() || want.Offset() != got.Offset() || want.Path() != got.Path() {
		return errors.New("getters differ")
	}
	return nil
}

// equalValue compares JSON-like values (times with Equal, NaN equal to NaN).
func equalValue(a, b any) bool {
	switch a := a.(type) {
	case time.Time:
		bt, ok := b.(time.Time)
		return ok && a.Equal(bt)
	case float64:
		bf, ok := b.(float64)
		return ok && (a == bf || math.IsNaN(a) && math.IsNaN(bf))
	case []any:
		bl, ok := b.([]any)
		if !ok || len(a) != len(bl) {
			return false
		}
		for i := range a {
			if !equalValue(a[i], bl[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			if w, ok := bm[k]; !ok || !equalValue(v, w) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

func roundTrip(t *testing.T, c *clicodec.Codec, r registry.Record) registry.Record {
	t.Helper()
	return roundTripWant(t, c, r, r)
}

// roundTripWant checks that r crosses the codec as want.
func roundTripWant(t *testing.T, c *clicodec.Codec, r, want registry.Record) registry.Record {
	t.Helper()
	b, err := c.Append([]byte("prefix"), r)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if !bytes.HasPrefix(b, []byte("prefix")) {
		t.Fatal("Append changed dst's bytes")
	}
	got, err := c.Decode(b[len("prefix"):])
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if err := sameRecord(want, got); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestRoundTrip(t *testing.T) {
	js := newCodec(t, "json", nil)
	raw := newCodec(t, "raw", nil)
	str := newCodec(t, "string", nil)
	c := clicodec.New(js, nil, raw)
	ts := time.Date(2026, 12, 2, 1, 2, 3, 4, time.UTC)
	meta := registry.Meta{Key: []byte("k"), Headers: []registry.Header{{Key: "h", Value: []byte("v")}, {Key: "e"}},
		Timestamp: ts, Topic: "in", Partition: 3, Offset: 77, Path: ""}
	value := map[string]any{
		"s": "x", "i": int64(-5), "f": 1.5, "n": json.Number("12345678901234567890"), "b": []byte{0, 1},
		"t": ts, "l": []any{nil, true, false, int64(1), []any{}}, "o": map[string]any{},
		"int": 7, "i32": int32(-8), "u": uint64(math.MaxUint64), "f32": float32(2.5),
	}
	cases := map[string]registry.Record{
		"raw json with meta":  registry.RawRecord([]byte(`{"a":1}`), js).WithMeta(meta),
		"raw checked":         registry.RawRecord([]byte(`{"a":1}`), js).WithRawValue([]byte(`{"a":2}`)),
		"raw bytes":           registry.RawRecord([]byte{0xff, 0}, raw),
		"decoded value":       registry.NewRecord(value),
		"nil value":           registry.NewRecord(nil),
		"empty key, no key":   registry.NewRecord("v").WithKey([]byte{}),
		"position":            registry.WithPosition(registry.NewRecord(int64(1)), registry.Position{Split: "s", File: "f", Offset: 9}),
		"kafka position":      registry.WithPosition(registry.RawRecord([]byte("1"), js), registry.Position{Topic: "t", Partition: 2, Offset: 5}),
		"codec not in table":  registry.RawRecord([]byte("hello"), str),
		"dead letter":         registry.MarkDeadLetter(&registry.DeadLetter{Error: "bad", Operator: "map", Offset: -1, Raw: []byte{1}, Input: value}),
		"dead letter, no raw": registry.MarkDeadLetter(&registry.DeadLetter{Error: "bad", Offset: 3}),
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			want := r
			if name == "codec not in table" { // travels decoded
				want = registry.NewRecord("hello")
			}
			roundTripWant(t, c, r, want)
		})
	}
	// The compact form: a raw 7-byte value with no metadata takes 10 bytes.
	b, _ := c.Append(nil, registry.RawRecord([]byte(`{"a":1}`), js))
	if len(b) != 10 {
		t.Errorf("a raw record of 7 bytes encodes to %d bytes, want 10", len(b))
	}
}

func TestErrors(t *testing.T) {
	js := newCodec(t, "json", nil)
	c := clicodec.New(js)
	if _, err := c.Append(nil, registry.NewRecord(map[string]any{"ch": make(chan int)})); err == nil || !strings.Contains(err.Error(), ".ch") || !strings.Contains(err.Error(), "chan int") {
		t.Errorf("a value of an unknown type: got %v, want an error naming the field and type", err)
	}
	strc, _ := format.Builtin().New("string", format.Config{})
	bad := registry.RawRecord([]byte{0xff}, &registry.Codecs{Value: strc})
	if _, err := c.Append(nil, bad); err == nil || !strings.Contains(err.Error(), "lacks") {
		t.Errorf("undecodable bytes of a codec not in the table: got %v", err)
	}
	b, _ := clicodec.New(js, js, js).Append(nil, registry.RawRecord([]byte(`1`), js))
	b[1] = 2 // codec index 2
	if _, err := c.Decode(b); err == nil || !strings.Contains(err.Error(), "same pipeline") {
		t.Errorf("a codec index beyond the table: got %v", err)
	}
	for _, in := range [][]byte{nil, {0x02}, {0x02, 10, 3}, {0x08, 0x02}, {0x80}} {
		if _, err := c.Decode(in); err == nil {
			t.Errorf("Decode(%x): want an error", in)
		}
	}
}

// FuzzRoundTrip builds records of every shape from fuzzed fields and
// checks that they cross the codec unchanged.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte(`{"a":1}`), []byte("key"), "h", []byte("hv"), int64(1700000000000000000), "topic", int32(1), int64(42), "path", uint16(0xffff), 1.5)
	f.Add([]byte{}, []byte(nil), "", []byte(nil), int64(0), "", int32(0), int64(0), "", uint16(0), 0.0)
	f.Add([]byte{0xff, 0xfe}, []byte{}, "k", []byte{}, int64(-1), "t", int32(-1), int64(-1), "p", uint16(3), math.Inf(-1))
	f.Fuzz(func(t *testing.T, val, key []byte, hk string, hv []byte, ts int64, topic string, part int32, off int64, path string, mode uint16, fl float64) {
		js := newCodec(t, "json", nil)
		raw := newCodec(t, "raw", newCodec(t, "string", nil).Value)
		c := clicodec.New(js, raw)
		var r registry.Record
		switch mode & 7 {
		case 0:
			r = registry.RawRecord(val, raw)
		case 1:
			r = registry.RawRecord(val, js)
		case 2:
			r = registry.RawRecord(val, js).WithRawValue(val)
		case 3:
			r = registry.NewRecord(map[string]any{
				string(val): string(hv), "i": off, "f": fl, "b": val, "l": []any{topic, int64(part), nil, fl > 0},
				"t": time.Unix(0, ts), "n": json.Number(path), "o": map[string]any{hk: []any{key}},
			})
		case 4:
			r = registry.NewRecord(string(val))
		case 5:
			r = registry.MarkDeadLetter(&registry.DeadLetter{Error: string(val), Operator: hk, Split: topic, File: path, Offset: off, Raw: key, Input: string(hv)})
		case 6:
			r = registry.NewRecord(nil)
		default:
			r = registry.NewRecord([]any{fl, int64(part)})
		}
		if mode&8 != 0 {
			m := registry.Meta{Key: key, Topic: topic, Partition: part, Offset: off, Path: path}
			if mode&16 != 0 {
				m.Timestamp = time.Unix(0, ts)
			}
			if mode&32 != 0 {
				m.Headers = []registry.Header{{Key: hk, Value: hv}, {Key: topic}}
			}
			r = r.WithMeta(m)
		}
		if mode&64 != 0 {
			r = registry.WithPosition(r, registry.Position{Split: hk, File: path, Topic: topic, Partition: part, Offset: off})
		}
		roundTrip(t, c, r)
	})
}

// FuzzDecode feeds arbitrary bytes to Decode: no panic, and whatever
// decodes encodes back to an equal record.
func FuzzDecode(f *testing.F) {
	js := newCodec(f, "json", nil)
	c := clicodec.New(js)
	for _, r := range []registry.Record{
		registry.RawRecord([]byte(`{"a":1}`), js).WithMeta(registry.Meta{Key: []byte("k"), Timestamp: time.Unix(5, 0), Headers: []registry.Header{{Key: "h"}}}),
		registry.NewRecord(map[string]any{"a": []any{int64(1), "x", 2.5, json.Number("1e400"), time.Unix(1, 2).UTC()}}),
		registry.MarkDeadLetter(&registry.DeadLetter{Error: "e", Input: int64(1)}),
	} {
		b, err := c.Append(nil, r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := c.Decode(b)
		if err != nil {
			return
		}
		if _, _, ok := r.Bytes(); ok {
			_, _ = r.Decode(context.Background()) // no panic either
		}
		roundTrip(t, c, r)
	})
}
