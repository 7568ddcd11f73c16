package opensearch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// benchDoc returns document k: about 200 bytes of JSON.
func benchDoc(b []byte, k int64) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, k, 10)
	b = append(b, `,"user":"user-`...)
	b = strconv.AppendInt(b, k%1000, 10)
	b = append(b, `","ts":`...)
	b = strconv.AppendInt(b, 1764547200000+k, 10)
	b = append(b, `,"msg":"`...)
	for len(b) < 190 {
		b = append(b, byte('a'+k%26))
	}
	return append(b, `"}`...)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestBenchSinkVsBulkLoop compares the sink (datagen → opensearch at
// parallelism 1 and 2, checkpoints every second) with a hand-written loop
// that builds the same bulk requests (1000 documents of ~200 bytes, ids
// given) and posts them one after the other. Not part of the test
// command: it runs only with SLUICE_OPENSEARCH_BENCH=<documents> and a
// node. It reports documents/s and client CPU seconds per million
// documents (the node's CPU is not counted; it shares the machine).
func TestBenchSinkVsBulkLoop(t *testing.T) {
	n, _ := strconv.ParseInt(os.Getenv("SLUICE_OPENSEARCH_BENCH"), 10, 64)
	if n <= 0 {
		t.Skip("set SLUICE_OPENSEARCH_BENCH=<documents> (e.g. 300000) to run the benchmark")
	}
	base := nodeURL(t)
	a := admin{base: base}
	const bulk = 1000
	report := func(name string, wall, cpu time.Duration, count int64) {
		t.Logf("%-22s %8d docs in %6.2fs: %8.0f docs/s, %5.2f CPU-s per million", name, count, wall.Seconds(),
			float64(count)/wall.Seconds(), cpu.Seconds()/float64(count)*1e6)
	}
	fresh := func() string {
		index := uniqueIndex("bench")
		if err := a.createIndex(index, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.deleteIndex(index) })
		return index
	}
	check := func(index string) {
		hits, err := a.must(http.MethodPost, "/"+index+"/_refresh", nil)
		if err != nil {
			t.Fatal(err, hits)
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
		var body, doc []byte
		for k := int64(0); k < n; {
			body = body[:0]
			for i := 0; i < bulk && k < n; i, k = i+1, k+1 {
				body = append(body, `{"index":{"_index":"`...)
				body = append(body, index...)
				body = append(body, `","_id":"`...)
				body = strconv.AppendInt(body, k, 10)
				body = append(body, "\"}}\n"...)
				doc = benchDoc(doc[:0], k)
				body = append(body, doc...)
				body = append(body, '\n')
			}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/_bulk?filter_path=errors", bytes.NewReader(body))
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
		}
		report("hand-written loop", time.Since(t0), cpuTime()-c0, n)
		check(index)
	}
	sinkRun := func(par int) {
		index := fresh()
		snk, err := NewSink([]string{base}, func(k int64, _ sink.Meta) (Action, error) {
			return Action{Index: index, ID: strconv.FormatInt(k, 10), Doc: benchDoc(make([]byte, 0, 208), k)}, nil
		}, BulkActions(bulk), Logger(discardLogger()))
		if err != nil {
			t.Fatal(err)
		}
		env := stream.New(stream.Parallelism(par), stream.CheckpointEvery(time.Second), stream.Logger(stream.DiscardLogger()))
		stream.SinkTo(stream.FromSource(env, datagen.New(func(k int64) int64 { return k }, datagen.Count(n), datagen.Splits(par)),
			watermark.None[int64](), "gen"), snk, "opensearch")
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
		defer cancel()
		c0, t0 := cpuTime(), time.Now()
		if _, err := env.Execute(ctx, "bench"); err != nil {
			t.Fatal(err)
		}
		report(fmt.Sprintf("sluice sink, par %d", par), time.Since(t0), cpuTime()-c0, n)
		check(index)
	}
	loop()
	sinkRun(1)
	sinkRun(2)
	loop()
	sinkRun(1)
}
