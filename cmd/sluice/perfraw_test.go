package main

import (
	"bytes"
	"context"
	binenc "encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// perfrawPipeline copies a Kafka topic to another with values, keys and
// headers as raw bytes, exactly once: the path on which the sink produces
// the fetched records themselves (no transform, no dead letters).
const perfrawPipeline = `name: perfraw
parallelism: 2
delivery: exactly-once
checkpoint:
  interval: 100ms
  dir: ${OUT}/checkpoints
source:
  type: kafka
  options:
    brokers: ${BROKERS}
    topics: ${IN}
    format: raw
sink:
  type: kafka
  options:
    brokers: ${BROKERS}
    topic: ${TOPIC}
    format: raw
`

// perfrawRecord is input record i: a binary value (not UTF-8, not JSON)
// carrying i, a key (none for every fifth record), two headers (one
// binary, one repeated key) and a timestamp three days old.
func perfrawRecord(i int, base time.Time) *kgo.Record {
	v := make([]byte, 40)
	binenc.BigEndian.PutUint64(v, uint64(i))
	for j := 8; j < len(v); j++ {
		v[j] = byte(0xf0 + (i+j)%16)
	}
	r := &kgo.Record{Value: v, Timestamp: base.Add(time.Duration(i) * time.Millisecond),
		Headers: []kgo.RecordHeader{{Key: "bin", Value: []byte{0xff, byte(i), 0}}, {Key: "n", Value: fmt.Append(nil, i)}, {Key: "n", Value: nil}}}
	if i%5 != 0 {
		r.Key = fmt.Appendf(nil, "key-%d", i)
	}
	return r
}

// perfrawProduce writes records [from, to) to topic in batches of 500, a
// batch every 10ms, so that a pipeline reading it is killed mid-stream.
func perfrawProduce(t *testing.T, brokers, topic string, from, to int, base time.Time) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Error(err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := from; i < to; i++ {
		cl.Produce(ctx, perfrawRecord(i, base), func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
		if (i+1)%500 == 0 {
			if err := cl.Flush(ctx); err != nil {
				t.Errorf("flush: %v", err)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Errorf("flush: %v", err)
	}
}

// TestPerfRawKafkaKill9Resume runs a Kafka → Kafka pipeline with format:
// raw while its input is still being written, kills it with SIGKILL once
// output is committed, resumes it with --from, and stops it with SIGTERM
// once all output is there. An independent read_committed reader then
// finds every input record exactly once, with its value, key (or none),
// headers (order, repeated keys and nil values included) and timestamp
// unchanged.
func TestPerfRawKafkaKill9Resume(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	const count = 40_000
	in, topic := kafkaTopic(t, brokers, nil), kafkaTopic(t, brokers, nil)
	base := time.Now().Add(-72 * time.Hour).Truncate(time.Millisecond)
	file := writePipeline(t, t.TempDir(), perfrawPipeline)
	out := t.TempDir()
	env := []string{"OUT=" + out, "BROKERS=" + brokers, "IN=" + in, "TOPIC=" + topic}

	produced := make(chan struct{})
	go func() {
		defer close(produced)
		perfrawProduce(t, brokers, in, 0, count, base)
	}()
	p := start(t, env, "run", "--progress", "off", file)
	if got := len(readTopic(t, brokers, topic, count/5)); got < count/5 {
		t.Fatalf("the first run committed %d records:\n%s", got, p.stderr())
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	<-produced

	p = start(t, env, "run", "--progress", "off", "--from", filepath.Join(out, "checkpoints"), file)
	if got := len(readTopic(t, brokers, topic, count)); got < count {
		t.Fatalf("after the resume %d records are committed, want %d:\n%s", got, count, p.stderr())
	}
	perfrawStop(t, p)

	recs := readTopic(t, brokers, topic, -1)
	seen := make([]int, count)
	for _, r := range recs {
		if len(r.Value) != 40 {
			t.Fatalf("value %x: not an input value", r.Value)
		}
		i := int(binenc.BigEndian.Uint64(r.Value))
		if i < 0 || i >= count {
			t.Fatalf("value %x: not an input value", r.Value)
		}
		seen[i]++
		want := perfrawRecord(i, base)
		switch {
		case !bytes.Equal(r.Value, want.Value):
			t.Fatalf("record %d: value %x, want %x", i, r.Value, want.Value)
		case !bytes.Equal(r.Key, want.Key) || (r.Key == nil) != (want.Key == nil):
			t.Fatalf("record %d: key %q, want %q", i, r.Key, want.Key)
		case fmt.Sprint(r.Headers) != fmt.Sprint(want.Headers):
			t.Fatalf("record %d: headers %v, want %v", i, r.Headers, want.Headers)
		case !r.Timestamp.Equal(want.Timestamp):
			t.Fatalf("record %d: timestamp %v, want %v", i, r.Timestamp, want.Timestamp)
		}
	}
	missing, dup := 0, 0
	for _, n := range seen {
		switch {
		case n == 0:
			missing++
		case n > 1:
			dup++
		}
	}
	if missing > 0 || dup > 0 {
		t.Fatalf("%d records read: %d of %d missing, %d duplicated", len(recs), missing, count, dup)
	}
}

// perfrawStop stops an unbounded run with SIGTERM and expects exit 0.
func perfrawStop(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("stopped with SIGTERM: exit %d\n%s", code, p.stderr())
	}
}
