package readerbase_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/readerbase"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hang bounds every wait for progress; exceeding it means the reader is
// stuck, not slow. It is a deadlock guard, not a timing assertion.
const hang = 20 * time.Second

// split is the test split: an id and the index of the next record to read.
type split struct {
	ID   string
	Next int
}

func (s split) SplitID() string { return s.ID }

// rec is one fetched element and, unchanged, the emitted record.
type rec struct {
	Split string
	Idx   int
}

// state is the mutable split state.
type state struct {
	id   string
	next int
}

// dataset is the fake external system: the records of each split. A split
// id not in the map is unbounded and never has data.
type dataset map[string][]rec

func makeData(sizes map[string]int) dataset {
	d := dataset{}
	for id, n := range sizes {
		rs := make([]rec, n)
		for i := range rs {
			rs[i] = rec{Split: id, Idx: i}
		}
		d[id] = rs
	}
	return d
}

func (d dataset) total() int {
	n := 0
	for _, rs := range d {
		n += len(rs)
	}
	return n
}

func (d dataset) splits() []split {
	var ss []split
	for _, id := range slices.Sorted(maps.Keys(d)) {
		ss = append(ss, split{ID: id})
	}
	return ss
}

// stats are counters shared by all memReaders of one test.
type stats struct {
	fetches  atomic.Int64 // non-empty batches returned
	recycled atomic.Int64
	closed   atomic.Int64
	created  atomic.Int64

	mu      sync.Mutex
	added   []string       // split ids passed to AddSplits, in order
	fetched map[string]int // records returned per split
}

func (s *stats) addedIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.added)
}

func (s *stats) fetchedOf(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetched[id]
}

// memReader is a SplitReader over a dataset. It serves its splits round
// robin, batchSize records at a time, and blocks on ctx when none of its
// splits has data.
type memReader struct {
	data      dataset
	batchSize int
	st        *stats
	gate      <-chan struct{} // if set, AddSplits of split "a" waits for it
	failAfter int             // if > 0, the failAfter-th Fetch fails
	panicIn   string          // "fetch" (second call), "add" or "close": that method panics
	closeErr  error

	cursors []*split
	paused  map[string]bool
	rr      int
	calls   int
}

var errBoom = fmt.Errorf("boom")

func (m *memReader) AddSplits(ss []split) error {
	if m.panicIn == "add" {
		panic(errBoom)
	}
	for _, s := range ss {
		if s.ID == "a" && m.gate != nil {
			<-m.gate
		}
		m.st.mu.Lock()
		m.st.added = append(m.st.added, s.ID)
		m.st.mu.Unlock()
		m.cursors = append(m.cursors, &s)
	}
	return nil
}

func (m *memReader) Fetch(ctx context.Context) (readerbase.Batch[rec], error) {
	m.calls++
	if m.panicIn == "fetch" && m.calls == 2 {
		panic("fetch went wrong")
	}
	if m.failAfter > 0 && m.calls >= m.failAfter {
		return readerbase.Batch[rec]{}, errBoom
	}
	for range m.cursors {
		c := m.cursors[m.rr%len(m.cursors)]
		m.rr++
		recs, bounded := m.data[c.ID]
		if !bounded || m.paused[c.ID] {
			continue
		}
		end := min(c.Next+m.batchSize, len(recs))
		b := readerbase.Batch[rec]{
			Records: []readerbase.SplitRecords[rec]{{SplitID: c.ID, Records: recs[c.Next:end]}},
			Recycle: func() { m.st.recycled.Add(1) },
		}
		m.st.mu.Lock()
		if m.st.fetched == nil {
			m.st.fetched = map[string]int{}
		}
		m.st.fetched[c.ID] += end - c.Next
		m.st.mu.Unlock()
		c.Next = end
		if end == len(recs) {
			b.Finished = []string{c.ID}
			m.cursors = slices.DeleteFunc(m.cursors, func(x *split) bool { return x == c })
		}
		m.st.fetches.Add(1)
		return b, nil
	}
	<-ctx.Done()
	return readerbase.Batch[rec]{}, ctx.Err()
}

func (m *memReader) Close() error {
	m.st.closed.Add(1)
	if m.panicIn == "close" {
		panic(errBoom)
	}
	return m.closeErr
}

// pausableReader is a memReader that implements source.SplitPauser.
type pausableReader struct{ *memReader }

func (p pausableReader) PauseOrResumeSplits(pause, resume []string) error {
	if p.paused == nil {
		p.paused = map[string]bool{}
	}
	for _, id := range pause {
		p.paused[id] = true
	}
	for _, id := range resume {
		delete(p.paused, id)
	}
	return nil
}

// fixture builds readers over one dataset.
type fixture struct {
	data      dataset
	batchSize int
	st        *stats
	gate      <-chan struct{}
	failAfter int
	panicIn   string
	closeErr  error
	pausable  bool
	rctx      *fakeContext
	finished  []string // ids passed to OnSplitFinished
}

func newFixture(data dataset, batchSize int) *fixture {
	return &fixture{data: data, batchSize: batchSize, st: &stats{}, rctx: newFakeContext()}
}

func (f *fixture) config() readerbase.Config[rec, rec, split, *state] {
	return readerbase.Config[rec, rec, split, *state]{
		NewSplitReader: func() (readerbase.SplitReader[rec, split], error) {
			f.st.created.Add(1)
			m := &memReader{data: f.data, batchSize: f.batchSize, st: f.st, gate: f.gate, failAfter: f.failAfter, panicIn: f.panicIn, closeErr: f.closeErr}
			if f.pausable {
				return pausableReader{m}, nil
			}
			return m, nil
		},
		Emitter:   readerbase.EmitterFunc[rec, rec, *state](emitRec),
		InitState: func(s split) *state { return &state{id: s.ID, next: s.Next} },
		ToSplit:   func(s *state) split { return split{ID: s.id, Next: s.next} },
		OnSplitFinished: func(done []*state) error {
			for _, s := range done {
				f.finished = append(f.finished, s.id)
			}
			return nil
		},
	}
}

// emitRec checks that records of a split arrive in order without gaps or
// duplicates, emits the record and advances the state.
func emitRec(e rec, out source.Output[rec], s *state) error {
	if e.Split != s.id || e.Idx != s.next {
		return fmt.Errorf("got record %v for split %q at %d", e, s.id, s.next)
	}
	out.Collect(e)
	s.next++
	return nil
}

func (f *fixture) newReader(t *testing.T, opts ...readerbase.Option) *readerbase.Reader[rec, rec, split, *state] {
	t.Helper()
	r, err := readerbase.New(f.rctx, f.config(), opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// fakeContext is a source.ReaderContext that counts split requests.
type fakeContext struct {
	requests int
	reg      *metrics.Registry
}

func newFakeContext() *fakeContext { return &fakeContext{reg: metrics.NewRegistry()} }

func (c *fakeContext) SubtaskIndex() int                  { return 0 }
func (c *fakeContext) Parallelism() int                   { return 1 }
func (c *fakeContext) Attempt() int                       { return 0 }
func (c *fakeContext) SendSplitRequest()                  { c.requests++ }
func (c *fakeContext) JobID() string                      { return "job" }
func (c *fakeContext) SendEventToEnumerator(source.Event) {}
func (c *fakeContext) Metrics() metrics.Group             { return c.reg.Root() }

// fakeOutput is a source.Output that records what it gets, per split.
type fakeOutput struct {
	all      []rec
	bySplit  map[string][]rec
	released []string
	wrongOut int // records collected on an output of another split
}

func newFakeOutput() *fakeOutput { return &fakeOutput{bySplit: map[string][]rec{}} }

func (o *fakeOutput) Collect(v rec)            { o.collect("", v) }
func (o *fakeOutput) CollectAt(v rec, _ int64) { o.collect("", v) }
func (o *fakeOutput) EmitWatermark(int64)      {}
func (o *fakeOutput) MarkIdle()                {}
func (o *fakeOutput) ReleaseSplit(id string)   { o.released = append(o.released, id) }
func (o *fakeOutput) ForSplit(id string) source.Output[rec] {
	return splitOutput{o: o, id: id}
}

func (o *fakeOutput) collect(id string, v rec) {
	if id != v.Split {
		o.wrongOut++
	}
	o.all = append(o.all, v)
	o.bySplit[v.Split] = append(o.bySplit[v.Split], v)
}

type splitOutput struct {
	o  *fakeOutput
	id string
}

func (s splitOutput) Collect(v rec)                         { s.o.collect(s.id, v) }
func (s splitOutput) CollectAt(v rec, _ int64)              { s.o.collect(s.id, v) }
func (s splitOutput) EmitWatermark(int64)                   {}
func (s splitOutput) MarkIdle()                             {}
func (s splitOutput) ReleaseSplit(id string)                { s.o.ReleaseSplit(id) }
func (s splitOutput) ForSplit(id string) source.Output[rec] { return s.o.ForSplit(id) }

type pollReader interface {
	PollNext(out source.Output[rec]) (source.InputStatus, error)
	Available() <-chan struct{}
}

// pollUntil calls PollNext until done reports true after a call, PollNext
// fails, or it returns EndOfInput; after NothingAvailable it waits on
// Available. It returns the last status and error.
func pollUntil(t *testing.T, r pollReader, out *fakeOutput, done func(source.InputStatus) bool) (source.InputStatus, error) {
	t.Helper()
	for range 1_000_000 {
		st, err := r.PollNext(out)
		if err != nil || st == source.EndOfInput || done(st) {
			return st, err
		}
		if st == source.NothingAvailable {
			select {
			case <-r.Available():
			case <-time.After(hang):
				t.Fatalf("no progress for %v after %d records", hang, len(out.all))
			}
		}
	}
	t.Fatal("PollNext loop did not end")
	return 0, nil
}

// drain polls until EndOfInput and fails the test on an error.
func drain(t *testing.T, r pollReader, out *fakeOutput) {
	t.Helper()
	st, err := pollUntil(t, r, out, func(source.InputStatus) bool { return false })
	if err != nil {
		t.Fatalf("PollNext: %v", err)
	}
	if st != source.EndOfInput {
		t.Fatalf("status = %v, want EndOfInput", st)
	}
}

func ready(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

var modes = []struct {
	name string
	opt  readerbase.Option
}{
	{"single", readerbase.SingleFetcher()},
	{"perSplit", readerbase.FetcherPerSplit()},
}
