package opensearch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectortest"
	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// bulkLoad writes docs (id → JSON) into index with the admin client and
// refreshes it.
func (a admin) bulkLoad(index string, ids []string, doc func(i int) string) error {
	for start := 0; start < len(ids); start += 2000 {
		var b strings.Builder
		for i := start; i < min(start+2000, len(ids)); i++ {
			fmt.Fprintf(&b, "{\"index\":{\"_index\":%q,\"_id\":%q}}\n%s\n", index, ids[i], doc(i))
		}
		data, err := a.must(http.MethodPost, "/_bulk", b.String())
		if err != nil {
			return err
		}
		if strings.Contains(string(data[:min(len(data), 40)]), `"errors":true`) {
			return fmt.Errorf("bulk load into %s: %.500s", index, data)
		}
	}
	_, err := a.must(http.MethodPost, "/"+index+"/_refresh", nil)
	return err
}

// srcConf is the external system of one source conformance case: an
// index with three shards; a record is a document carrying its split and
// seq. Slices do not follow the suite's splits (a document's slice comes
// from its id), so the suite compares sets (Unordered).
type srcConf struct {
	a      admin
	url    string
	index  string
	splits int
	srcs   []*Source
}

func (c *srcConf) Write(split int, recs []connectortest.Record) error {
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = fmt.Sprintf("%d-%d", r.Split, r.Seq)
	}
	return c.a.bulkLoad(c.index, ids, func(i int) string {
		d, _ := json.Marshal(confDoc{Split: recs[i].Split, Seq: recs[i].Seq, Payload: recs[i].Payload})
		return string(d)
	})
}

func (c *srcConf) Source() (source.Source[Hit, Split, []Split], error) {
	s, err := NewSource(context.Background(), []string{c.url}, c.index, Slices(c.splits), PageSize(100))
	if err == nil {
		c.srcs = append(c.srcs, s)
	}
	return s, err
}

func (c *srcConf) Record(h Hit) (connectortest.Record, error) {
	var d confDoc
	if err := json.Unmarshal(h.Source, &d); err != nil {
		return connectortest.Record{}, fmt.Errorf("hit %s: %w", h.ID, err)
	}
	return connectortest.Record{Split: d.Split, Seq: d.Seq, Payload: d.Payload}, nil
}

func (c *srcConf) Close() error {
	for _, s := range c.srcs {
		_ = s.Close(context.Background())
	}
	c.a.deleteIndex(c.index)
	return nil
}

// TestSourceConformance runs connectortest's source suite on the real
// node (bounded cases; the source reads a point in time, so data written
// after the start is never seen).
func TestSourceConformance(t *testing.T) {
	forEachNode(t, func(t *testing.T, base string) {
		a := admin{base: base}
		connectortest.TestSource(t, func(s connectortest.SourceSettings) (connectortest.SourceContext[Hit, Split, []Split], error) {
			if !s.Bounded {
				return nil, fmt.Errorf("the source reads a point in time and is bounded: %w", errors.ErrUnsupported)
			}
			c := &srcConf{a: a, url: base, index: uniqueIndex("src"), splits: s.Splits}
			body := map[string]any{"settings": map[string]any{"number_of_shards": 3, "number_of_replicas": 0}}
			_, err := a.must(http.MethodPut, "/"+c.index, body)
			return c, err
		}, connectortest.Unordered(), connectortest.CaseTimeout(2*time.Minute))
	})
}

// collect is an at-least-once sink of hits into memory.
type collect struct {
	mu   sync.Mutex
	hits []Hit
}

func (c *collect) CreateWriter(context.Context, sink.InitContext) (sink.Writer[Hit], error) {
	return collectWriter{c}, nil
}

type collectWriter struct{ c *collect }

func (w collectWriter) Write(_ context.Context, h Hit, _ sink.Meta) error {
	w.c.mu.Lock()
	w.c.hits = append(w.c.hits, h)
	w.c.mu.Unlock()
	return nil
}
func (collectWriter) Flush(context.Context, bool) error { return nil }
func (collectWriter) Close() error                      { return nil }

// TestSlicedReadEqualsIndex reads 10k documents over 3 shards with 5
// slices at parallelism 3: the hits are exactly the index's documents,
// with their sources.
func TestSlicedReadEqualsIndex(t *testing.T) {
	forEachNode(t, func(t *testing.T, base string) {
		a := admin{base: base}
		index := uniqueIndex("slice")
		if _, err := a.must(http.MethodPut, "/"+index, map[string]any{"settings": map[string]any{"number_of_shards": 3, "number_of_replicas": 0}}); err != nil {
			t.Fatal(err)
		}
		defer a.deleteIndex(index)
		const n = 10_000
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("doc-%05d", i)
		}
		docOf := func(i int) string { return fmt.Sprintf(`{"i":%d,"s":"%s"}`, i, strings.Repeat("v", i%50)) }
		if err := a.bulkLoad(index, ids, docOf); err != nil {
			t.Fatal(err)
		}
		src, err := NewSource(t.Context(), []string{base}, index, Slices(5), PageSize(700))
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close(context.Background())
		out := &collect{}
		env := stream.New(stream.Parallelism(3), stream.Logger(stream.DiscardLogger()))
		stream.SinkTo(stream.FromSource(env, src, watermark.None[Hit](), "os"), out, "mem")
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if _, err := env.Execute(ctx, "read"); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, h := range out.hits {
			if _, dup := got[h.ID]; dup {
				t.Errorf("hit %s twice", h.ID)
			}
			got[h.ID] = string(h.Source)
			// OpenSearch sorts by (_doc, _id), Elasticsearch by _shard_doc.
			if h.Index != index || len(h.Sort) < 1 || len(h.Sort) > 2 {
				t.Errorf("hit %s in %s with sort %s: want index %s and one or two sort values", h.ID, h.Index, h.Sort, index)
			}
		}
		for i, id := range ids {
			if src, ok := got[id]; !ok {
				t.Errorf("document %s missing", id)
			} else if src != docOf(i) {
				t.Errorf("document %s: source %s, want %s", id, src, docOf(i))
			}
		}
		if len(out.hits) != n {
			t.Errorf("%d hits, want %d", len(out.hits), n)
		}
	})
}

// TestRestoreMidSlice reads two pages of a slice with one reader,
// snapshots it, and reads the rest with a new reader restored from the
// snapshot: together they read the slice's documents once each, and the
// restored reader starts after the snapshot's last hit.
func TestRestoreMidSlice(t *testing.T) {
	forEachNode(t, func(t *testing.T, base string) {
		a := admin{base: base}
		index := uniqueIndex("resume")
		if _, err := a.must(http.MethodPut, "/"+index, map[string]any{"settings": map[string]any{"number_of_shards": 2, "number_of_replicas": 0}}); err != nil {
			t.Fatal(err)
		}
		defer a.deleteIndex(index)
		const n = 3000
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("r-%d", i)
		}
		if err := a.bulkLoad(index, ids, func(i int) string { return fmt.Sprintf(`{"i":%d}`, i) }); err != nil {
			t.Fatal(err)
		}
		src, err := NewSource(t.Context(), []string{base}, index, Slices(1), PageSize(250))
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close(context.Background())

		// poll reads from r until want hits or its end; bounded.
		poll := func(r source.Reader[Hit, Split], out *fakes.Output[Hit], want int) {
			t.Helper()
			deadline := time.Now().Add(30 * time.Second)
			for len(out.Records) < want {
				st, err := r.PollNext(out)
				if err != nil {
					t.Fatal(err)
				}
				if st == source.EndOfInput {
					return
				}
				if st == source.NothingAvailable {
					select {
					case <-r.Available():
					case <-time.After(time.Second):
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("read %d hits in 30 s, want %d", len(out.Records), want)
				}
			}
		}
		start := func(splits []Split) (source.Reader[Hit, Split], *fakes.Output[Hit]) {
			rc := &fakes.ReaderContext{}
			r, err := src.CreateReader(rc)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := r.AddSplits(splits); err != nil {
				t.Fatal(err)
			}
			r.NotifyNoMoreSplits()
			return r, &fakes.Output[Hit]{}
		}
		r1, out1 := start(src.Splits)
		poll(r1, out1, 500)
		snap, err := r1.SnapshotState(1)
		if err != nil {
			t.Fatal(err)
		}
		_ = r1.Close()
		if len(snap) != 1 || snap[0].After == nil {
			t.Fatalf("snapshot %+v: want the slice with a position", snap)
		}
		first := len(out1.Records)
		last := out1.Records[first-1].Value
		if !slices.EqualFunc(snap[0].After, last.Sort, func(a, b json.RawMessage) bool { return string(a) == string(b) }) {
			t.Errorf("snapshot position %s, want the last emitted hit's sort values %s", snap[0].After, last.Sort)
		}
		// Round-trip the split through its serializer, as a checkpoint does.
		ser := src.SplitSerializer()
		data, err := ser.Serialize(snap[0])
		if err != nil {
			t.Fatal(err)
		}
		restored, err := ser.Deserialize(ser.Version(), data)
		if err != nil {
			t.Fatal(err)
		}
		r2, out2 := start([]Split{restored})
		defer r2.Close()
		poll(r2, out2, n)
		seen := map[string]int{}
		for _, rec := range append(out1.Records, out2.Records...) {
			seen[rec.Value.ID]++
		}
		for _, id := range ids {
			if seen[id] != 1 {
				t.Errorf("document %s read %d times, want once", id, seen[id])
			}
		}
		if first+len(out2.Records) != n {
			t.Errorf("read %d + %d hits, want %d in all", first, len(out2.Records), n)
		}
		t.Logf("first reader: %d hits; restored reader: %d", first, len(out2.Records))
	})
}

// TestSourceErrors: a missing index fails NewSource naming it; a point in
// time that is gone fails the reader with an error saying it cannot
// resume; bad options are configuration errors.
func TestSourceErrors(t *testing.T) {
	if _, err := NewSource(t.Context(), []string{"http://127.0.0.1:9"}, "i", Slices(0)); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Slices is 0") {
		t.Errorf("Slices(0): %v", err)
	}
	if _, err := NewSource(t.Context(), []string{"http://127.0.0.1:9"}, "i", Query(json.RawMessage(`{`))); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("bad query: %v", err)
	}
	forEachNode(t, func(t *testing.T, base string) {
		a := admin{base: base}
		_, err := NewSource(t.Context(), []string{base}, "no-such-index-x")
		if err == nil || !strings.Contains(err.Error(), "no-such-index-x") || !strings.Contains(err.Error(), "index_not_found_exception") {
			t.Errorf("missing index: %v", err)
		}
		index := uniqueIndex("gone")
		if err := a.bulkLoad(index, []string{"a", "b"}, func(int) string { return `{}` }); err != nil {
			t.Fatal(err)
		}
		defer a.deleteIndex(index)
		src, err := NewSource(t.Context(), []string{base}, index, Slices(1), MaxTries(1))
		if err != nil {
			t.Fatal(err)
		}
		if err := src.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		r := &sliceReader{s: src, split: src.Splits[0]}
		defer r.Close()
		if _, err := r.Fetch(t.Context()); err == nil || !strings.Contains(err.Error(), "point in time is gone") {
			t.Errorf("Fetch after the point in time was deleted: %v", err)
		}
	})
}

// TestSourceQueryAndFields: Query restricts the hits, SourceFields their
// _source, and SourceFields() with no field drops it.
func TestSourceQueryAndFields(t *testing.T) {
	forEachNode(t, func(t *testing.T, base string) {
		a := admin{base: base}
		index := uniqueIndex("query")
		ids := make([]string, 100)
		for i := range ids {
			ids[i] = fmt.Sprint(i)
		}
		if err := a.bulkLoad(index, ids, func(i int) string { return fmt.Sprintf(`{"i":%d,"even":%v,"pad":"x"}`, i, i%2 == 0) }); err != nil {
			t.Fatal(err)
		}
		defer a.deleteIndex(index)
		read := func(opts ...SourceOption) []Hit {
			src, err := NewSource(t.Context(), []string{base}, index, append(opts, Slices(2), PageSize(7))...)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close(context.Background())
			out := &collect{}
			env := stream.New(stream.Parallelism(2), stream.Logger(stream.DiscardLogger()))
			stream.SinkTo(stream.FromSource(env, src, watermark.None[Hit](), "os"), out, "mem")
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if _, err := env.Execute(ctx, "read"); err != nil {
				t.Fatal(err)
			}
			return out.hits
		}
		hits := read(Query(json.RawMessage(`{"term":{"even":true}}`)), SourceFields("i"))
		if len(hits) != 50 {
			t.Errorf("%d hits, want the 50 even documents", len(hits))
		}
		for _, h := range hits {
			var d map[string]any
			if err := json.Unmarshal(h.Source, &d); err != nil || len(d) != 1 || d["i"] == nil {
				t.Errorf("hit %s: source %s, want only i", h.ID, h.Source)
				break
			}
		}
		for _, h := range read(SourceFields()) {
			if h.Source != nil {
				t.Errorf("hit %s has source %s, want none", h.ID, h.Source)
				break
			}
		}
	})
}
