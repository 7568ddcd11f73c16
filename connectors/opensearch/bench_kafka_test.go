package opensearch

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/connectors/kafka"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// kafkaDoc is a Kafka record on its way to the index: its id is
// topic-partition-offset, so a replay rewrites the same document.
type kafkaDoc struct {
	id    string
	value []byte
}

// TestBenchKafkaToOpenSearch compares a Kafka → OpenSearch job (kafka
// source, opensearch sink, bulk 1000, checkpoints every second) with a
// hand-written franz-go consume → bulk-index loop with the same bulk size
// and ids, over a topic of 8 partitions holding documents of ~200 bytes.
// Not part of the test command: it runs with SLUICE_OPENSEARCH_BENCH=
// <documents>, a node and SLUICE_KAFKA_BROKERS. It reports documents/s and
// client CPU seconds per million (broker and node not counted).
func TestBenchKafkaToOpenSearch(t *testing.T) {
	n, _ := strconv.ParseInt(os.Getenv("SLUICE_OPENSEARCH_BENCH"), 10, 64)
	brokers := os.Getenv("SLUICE_KAFKA_BROKERS")
	if n <= 0 || brokers == "" {
		t.Skip("set SLUICE_OPENSEARCH_BENCH=<documents> and SLUICE_KAFKA_BROKERS to run the benchmark")
	}
	base := nodeURL(t)
	a := admin{base: base}
	seeds := strings.Split(brokers, ",")
	const bulk, partitions = 1000, 8

	topic := uniqueIndex("bench-topic")
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	var doc []byte
	for k := range n {
		doc = benchDoc(doc[:0], k)
		cl.Produce(ctx, &kgo.Record{Key: strconv.AppendInt(nil, k, 10), Value: append([]byte(nil), doc...)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	t.Logf("produced %d records into %s (%d partitions)", n, topic, partitions)

	report := func(name string, wall, cpu time.Duration) {
		t.Logf("%-26s %8d docs in %6.2fs: %8.0f docs/s, %5.2f CPU-s per million", name, n, wall.Seconds(),
			float64(n)/wall.Seconds(), cpu.Seconds()/float64(n)*1e6)
	}
	fresh := func() string {
		index := uniqueIndex("kbench")
		if err := a.createIndex(index, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.deleteIndex(index) })
		return index
	}
	check := func(index string) {
		if _, err := a.must(http.MethodPost, "/"+index+"/_refresh", nil); err != nil {
			t.Fatal(err)
		}
		data, err := a.must(http.MethodGet, "/"+index+"/_count", nil)
		if err != nil || !bytes.Contains(data, []byte(`"count":`+strconv.FormatInt(n, 10))) {
			t.Fatalf("index %s: %s %v, want %d documents", index, data, err, n)
		}
	}

	loop := func() {
		index := fresh()
		tr := http.DefaultTransport.(*http.Transport).Clone()
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr}
		c0, t0 := cpuTime(), time.Now()
		cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		var body []byte
		inBody := 0
		send := func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/_bulk?filter_path=errors", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/x-ndjson")
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !bytes.Contains(data, []byte(`"errors":false`)) {
				t.Fatalf("bulk: %d %s", resp.StatusCode, data)
			}
			body, inBody = body[:0], 0
		}
		var got int64
		for got < n {
			fs := cons.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				body = append(body, `{"index":{"_index":"`...)
				body = append(body, index...)
				body = append(body, `","_id":"`...)
				body = append(body, r.Topic...)
				body = append(body, '-')
				body = strconv.AppendInt(body, int64(r.Partition), 10)
				body = append(body, '-')
				body = strconv.AppendInt(body, r.Offset, 10)
				body = append(body, "\"}}\n"...)
				body = append(body, r.Value...)
				body = append(body, '\n')
				got++
				if inBody++; inBody == bulk {
					send()
				}
			})
		}
		if inBody > 0 {
			send()
		}
		report("franz-go + bulk loop", time.Since(t0), cpuTime()-c0)
		check(index)
	}
	job := func(par int) {
		index := fresh()
		src, err := kafka.NewSource(seeds, kafka.DeserializerFunc[kafkaDoc](func(r *kgo.Record) (kafkaDoc, error) {
			id := make([]byte, 0, len(r.Topic)+24)
			id = append(id, r.Topic...)
			id = append(id, '-')
			id = strconv.AppendInt(id, int64(r.Partition), 10)
			id = append(id, '-')
			id = strconv.AppendInt(id, r.Offset, 10)
			return kafkaDoc{id: string(id), value: r.Value}, nil
		}), kafka.Topics(topic), kafka.StartingOffsets(kafka.Earliest()), kafka.Bounded(kafka.Latest()), kafka.SourceLogger(discardLogger()))
		if err != nil {
			t.Fatal(err)
		}
		snk, err := NewSink([]string{base}, func(d kafkaDoc, _ sink.Meta) (Action, error) {
			return Action{Index: index, ID: d.id, Doc: d.value}, nil
		}, BulkActions(bulk), Logger(discardLogger()))
		if err != nil {
			t.Fatal(err)
		}
		env := stream.New(stream.Parallelism(par), stream.CheckpointEvery(time.Second), stream.Logger(stream.DiscardLogger()))
		stream.SinkTo(stream.FromSource(env, src, watermark.None[kafkaDoc](), "kafka"), snk, "opensearch")
		jctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		c0, t0 := cpuTime(), time.Now()
		if _, err := env.Execute(jctx, "kafka-to-opensearch"); err != nil {
			t.Fatal(err)
		}
		report("sluice job, par "+strconv.Itoa(par), time.Since(t0), cpuTime()-c0)
		check(index)
	}
	loop()
	job(1)
	job(2)
	loop()
	job(1)
	job(2)
}
