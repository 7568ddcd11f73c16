package postgres

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/sink"
)

// TestMapSinkValues writes the CLI's JSON-like values (the contract of
// internal/format: map[string]any, []any, string, bool, nil, int64,
// float64, json.Number, []byte, time.Time) into columns of the usual
// types, in both write modes, and reads them back as text.
func TestMapSinkValues(t *testing.T) {
	ts := time.Date(2026, 12, 1, 6, 30, 0, 123000000, time.UTC)
	rec := map[string]any{
		"id": int64(1), "i4": int64(7), "i8": int64(1) << 40, "f8": 2.5, "num": json.Number("12345678901234567890.5"),
		"num2": int64(3), "t": "text", "b": true, "n": nil, "ts": ts, "tsz": ts, "d": ts, "by": []byte{1, 2},
		"j": map[string]any{"a": []any{int64(1), "x"}}, "jb": []any{true, nil}, "arr": []any{"a", "b"},
		"f4": json.Number("1.5"), "i4n": json.Number("42"),
	}
	want := map[string]string{
		"id": "1", "i4": "7", "i8": "1099511627776", "f8": "2.5", "num": "12345678901234567890.5", "num2": "3",
		"t": "text", "b": "true", "n": "<null>", "ts": "2026-12-01 06:30:00.123", "tsz": "2026-12-01 06:30:00.123+00",
		"d": "2026-12-01", "by": `\x0102`, "j": `{"a":[1,"x"]}`, "jb": "[true, null]", "arr": "{a,b}", "f4": "1.5", "i4n": "42",
	}
	for _, mode := range []Mode{Append, Upsert} {
		t.Run(mode.String(), func(t *testing.T) {
			table := newTable(t, "vals", `id bigint PRIMARY KEY, i4 int, i8 bigint, f8 double precision, num numeric, num2 numeric,
				t text, b boolean, n text, ts timestamp, tsz timestamptz, d date, by bytea, j json, jb jsonb, arr text[], f4 real, i4n int`)
			mustExec(t, "SET TIME ZONE 'UTC'", "ALTER DATABASE "+dbName(t)+" SET timezone TO 'UTC'")
			ms, err := NewMapSink(needServer(t), table, WriteMode(mode), DeliveryGuarantee(AtLeastOnce))
			if err != nil {
				t.Fatal(err)
			}
			w, err := ms.CreateWriter(t.Context(), &fakes.InitContext{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if err := w.Write(t.Context(), rec, sink.Meta{}); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(t.Context(), true); err != nil {
				t.Fatal(err)
			}
			for col, v := range want {
				type s struct{ V *string }
				got, err := query[s](t.Context(), "SELECT "+col+"::text FROM "+table)
				if err != nil {
					t.Fatal(err)
				}
				g := "<null>"
				if got[0].V != nil {
					g = *got[0].V
				}
				if g != v {
					t.Errorf("column %s: got %q, want %q", col, g, v)
				}
			}
		})
	}
}

func dbName(t *testing.T) string {
	type n struct{ N string }
	r, err := query[n](t.Context(), "SELECT current_database()")
	if err != nil {
		t.Fatal(err)
	}
	return r[0].N
}

func TestServerMajor(t *testing.T) {
	for v, want := range map[string]int{"15.18 (Debian 15.18-0+deb12u1)": 15, "9.6.24": 9, "17devel": 17, "": 0, "x": 0} {
		if got := serverMajor(v); got != want {
			t.Errorf("serverMajor(%q) = %d, want %d", v, got, want)
		}
	}
}

// TestMapSinkDefaultColumns: without Columns a map sink writes every
// column but generated and identity-always ones, which keep their values.
func TestMapSinkDefaultColumns(t *testing.T) {
	table := newTable(t, "defcols", "id int GENERATED ALWAYS AS IDENTITY, k bigint, v text, g text GENERATED ALWAYS AS (v || '!') STORED")
	ms, err := NewMapSink(needServer(t), table, DeliveryGuarantee(AtLeastOnce))
	if err != nil {
		t.Fatal(err)
	}
	w, err := ms.CreateWriter(t.Context(), &fakes.InitContext{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i, v := range []string{"a", "b"} {
		if err := w.Write(t.Context(), map[string]any{"k": int64(i), "v": v}, sink.Meta{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID   int32
		K    int64
		V, G string
	}
	got, err := query[row](t.Context(), "SELECT id, k, v, g FROM "+table+" ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	want := []row{{1, 0, "a", "a!"}, {2, 1, "b", "b!"}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("rows %v, want %v", got, want)
	}
}
