package main

// The lazy JSON path through the binary (internal/transform/lazy.go), on
// the real broker of scripts/kafka.sh (skipped without
// SLUICE_KAFKA_BROKERS): a Kafka → Kafka pipeline whose filter and map
// read one field of each JSON value and write it back doubled, killed with
// SIGKILL and resumed with --from. An independent read_committed consumer
// checks that every output is its input with the field doubled, once.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// perfjsonPad is a string member written with escapes that a decode and
// encode would rewrite (é as \u00e9, <&> escaped by encoding/json): a
// lazy map copies its bytes as they are.
const perfjsonPad = `"é\u00e9<&>\/"`

// perfjsonValue is input value i: amount, id, the pad, a nested object
// with spacing, exact numbers (1.0, an integer beyond int64), and every
// fifth record without x.
func perfjsonValue(i int) []byte {
	x := `, "x": 1.0`
	if i%5 == 0 {
		x = ""
	}
	return fmt.Appendf(nil, `{"amount": %d, "id": %d, "pad": %s, "n": {"b": [1, 2], "a": null}%s, "big": 12345678901234567891}`,
		i*37%1000, i, perfjsonPad, x)
}

// perfjsonDecode decodes a JSON object with exact numbers.
func perfjsonDecode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return m
}

const perfjsonTransforms = `transforms:
  - name: positive
    filter: amount >= 0
  - name: double
    map: '{"amount": amount * 2, "id": id, "pad": pad, "n": n, "x": x, "big": big}'
`

// TestPerfjsonDoubleKill9Resume: a filter reading amount and a map
// doubling it (both on the lazy path: the source does not decode, the
// map writes bytes) over 12,000 records, killed with SIGKILL after a
// quarter committed, resumed with --from after the second half of the
// input arrived: every output is its input with amount doubled and every
// other member equal (x null where the input lacks it), exactly once,
// with the input's key and timestamp; the pad's bytes are the input's.
func TestPerfjsonDoubleKill9Resume(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	const half = 6000
	in, out := kafkaTopic(t, brokers, nil), kafkaTopic(t, brokers, nil)
	base := time.Now().Add(-3 * time.Hour)
	recs := make([]*kgo.Record, 2*half)
	for i := range recs {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k-%d", i), Value: perfjsonValue(i), Timestamp: base.Add(time.Duration(i) * time.Millisecond)}
	}
	produceRecs(t, brokers, in, recs[:half])
	dir := t.TempDir()
	file := writePipeline(t, dir, kafkaToKafka("", perfjsonTransforms, ""))
	ckpt := filepath.Join(dir, "checkpoints")
	env := []string{"NAME=perfjson", "CKPT=" + ckpt, "BROKERS=" + brokers, "IN=" + in, "OUT=" + out}
	p := start(t, env, "run", "--progress", "off", file)
	if n := len(readTopic(t, brokers, out, half/4)); n < half/4 {
		t.Fatalf("the pipeline committed %d records:\n%s", n, p.stderr())
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	produceRecs(t, brokers, in, recs[half:])
	p = start(t, env, "run", "--progress", "off", "--from", ckpt, file)
	if n := len(readTopic(t, brokers, out, 2*half)); n < 2*half {
		t.Fatalf("after the resume the output holds %d records, want %d:\n%s", n, 2*half, p.stderr())
	}
	stopWithSIGTERM(t, p)

	got := readTopic(t, brokers, out, -1)
	seen := make([]int, 2*half)
	for _, r := range got {
		o := perfjsonDecode(t, r.Value)
		id, err := o["id"].(json.Number).Int64()
		if err != nil || id < 0 || id >= 2*half {
			t.Fatalf("output %q: bad id", r.Value)
		}
		seen[id]++
		in := recs[id]
		want := perfjsonDecode(t, in.Value)
		a, _ := want["amount"].(json.Number).Int64()
		want["amount"] = json.Number(fmt.Sprint(2 * a))
		if _, ok := want["x"]; !ok {
			want["x"] = nil
		}
		if !reflect.DeepEqual(o, want) {
			t.Fatalf("output %s, want input %s with amount doubled", r.Value, in.Value)
		}
		if !bytes.Contains(r.Value, []byte(`"pad":`+perfjsonPad)) {
			t.Errorf("output %s: the pad's bytes are not the input's %s (re-encoded, not copied)", r.Value, perfjsonPad)
		}
		if string(r.Key) != string(in.Key) || !r.Timestamp.Equal(in.Timestamp) {
			t.Fatalf("output %s: key %q ts %v, want %q %v", r.Value, r.Key, r.Timestamp, in.Key, in.Timestamp)
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("record %d: %d times in the output, want once (%d records read)", id, n, len(got))
		}
	}
}
