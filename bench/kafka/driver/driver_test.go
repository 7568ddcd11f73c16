package main

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
)

// The verification compares hashes of output values with the input's, so
// the values must survive a decode and encode byte for byte.
func TestValueIsCanonicalJSON(t *testing.T) {
	for _, size := range []int{64, 100, 1000} {
		for _, i := range []int{0, 1, 9, 12345, 1_999_999, 123_456_789} {
			v := value(nil, i, size)
			if len(v) != size {
				t.Fatalf("value(%d, %d) has %d bytes: %s", i, size, len(v), v)
			}
			var m map[string]any
			if err := json.Unmarshal(v, &m); err != nil {
				t.Fatalf("value(%d, %d) = %s: %v", i, size, v, err)
			}
			again, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if string(again) != string(v) {
				t.Fatalf("value(%d, %d) changes in a JSON round trip:\n%s\n%s", i, size, v, again)
			}
		}
	}
}

func TestDiffFindsMissingAndDuplicates(t *testing.T) {
	want := expectedHashes(1000, 100, "json")
	if m, e := diff(want, slices.Clone(want)); m != 0 || e != 0 {
		t.Fatalf("equal sets: missing %d extra %d", m, e)
	}
	got := slices.Clone(want[1:]) // one missing
	got = append(got, want[500])  // one duplicate
	got = append(got, 42)         // one foreign
	slices.Sort(got)
	if m, e := diff(want, got); m != 1 || e != 2 {
		t.Fatalf("missing %d extra %d, want 1 and 2", m, e)
	}
	if m, e := diff(want, nil); m != len(want) || e != 0 {
		t.Fatalf("empty output: missing %d extra %d", m, e)
	}
	if got := expectedHashes(100000, 100, "json"); len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Fatal("two input values hash alike: the multiset check would be blind to a swap")
	}
}

func TestSteadyRate(t *testing.T) {
	ms := make([]int64, 1000) // 1000 records, one per ms
	for i := range ms {
		ms[i] = int64(i)
	}
	if r := steadyRate(ms); r < 999 || r > 1001 {
		t.Fatalf("steady rate %v, want 1000 records/s", r)
	}
	if r := steadyRate(make([]int64, 1000)); r != 0 {
		t.Fatalf("all in one millisecond: %v, want 0 (unknown)", r)
	}
}

func TestProcCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if _, err := procCPU(os.Getpid(), clockTick()); err != nil {
		t.Fatal(err)
	}
	if v, err := vmHWM(os.Getpid()); err != nil || v <= 0 {
		t.Fatalf("VmHWM of the test: %v, %v", v, err)
	}
	if _, err := procCPU(0, 100); err == nil {
		t.Fatal("pid 0: no error")
	}
}

// The Avro input must survive a decode and encode (as the loop and sluice
// do it) byte for byte, and keep its size.
func TestAvroValueRoundTrip(t *testing.T) {
	s, err := avro.Parse(avroSchema)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, 63, 64, 12345, 1_999_999, 123_456_789} {
		v := avroValue(nil, i, 100, 4242)
		if len(v) < 99 || len(v) > 101 {
			t.Fatalf("avroValue(%d) has %d bytes, want about 100", i, len(v))
		}
		if v[0] != 0 || binary.BigEndian.Uint32(v[1:5]) != 4242 {
			t.Fatalf("avroValue(%d): header % x", i, v[:5])
		}
		var m map[string]any
		if err := avro.Unmarshal(s, v[avroHeader:], &m); err != nil {
			t.Fatalf("avroValue(%d): %v", i, err)
		}
		if m["id"] != int64(i) || m["user"] != "user-"+strconv.Itoa(i%10) || m["amount"] != int64(i*37%1000) {
			t.Fatalf("avroValue(%d) decodes to %v", i, m)
		}
		again, err := avro.Marshal(s, m)
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(v[avroHeader:]) {
			t.Fatalf("avroValue(%d) changes in an Avro round trip", i)
		}
	}
}

// TestDoubledValue: the doubled value is the input value with amount
// doubled, every other field the same, in the input's canonical form.
func TestDoubledValue(t *testing.T) {
	for _, i := range []int{0, 1, 27, 28, 999, 123456} {
		in, out := value(nil, i, 100), doubledValue(nil, i, 100)
		var a, b map[string]any
		if err := json.Unmarshal(in, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if b["amount"] != 2*a["amount"].(float64) {
			t.Errorf("record %d: amount %v, want twice %v", i, b["amount"], a["amount"])
		}
		a["amount"] = b["amount"]
		canon, _ := json.Marshal(a)
		if !reflect.DeepEqual(a, b) || string(canon) != string(out) {
			t.Errorf("record %d: %s, want %s", i, out, canon)
		}
	}
	if !doubles("sluice-json-double@sluice") || !doubles("flink-json-double") || doubles("sluice-json-map") {
		t.Error("doubles: wrong contenders")
	}
}

func TestFirstRecordMS(t *testing.T) {
	start := time.UnixMilli(1_000_000).Add(250 * time.Microsecond)
	if got := firstRecordMS(start, []int64{1_000_042, 1_000_050}); got != 41.75 {
		t.Fatalf("firstRecordMS = %v, want 41.75", got)
	}
	if got := firstRecordMS(start, nil); got != -1 {
		t.Fatalf("firstRecordMS of no records = %v, want -1", got)
	}
}
