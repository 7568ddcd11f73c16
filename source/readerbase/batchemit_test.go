package readerbase_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/readerbase"
)

// batchRecorder is a BatchEmitter that checks each group like emitRec,
// moves the state once per group and records the group sizes it got.
type batchRecorder struct {
	groups []int
	emits  int // calls of Emit (the Reader must not make any)
	fail   int // if > 0, the group holding the record of this index fails
}

var errBadGroup = errors.New("bad group")

func (b *batchRecorder) Emit(e rec, out source.Output[rec], s *state) error {
	b.emits++
	return emitRec(e, out, s)
}

func (b *batchRecorder) EmitBatch(es []rec, out source.Output[rec], s *state) error {
	b.groups = append(b.groups, len(es))
	if len(es) == 0 {
		return errors.New("empty group")
	}
	next := s.next
	for _, e := range es {
		if e.Split != s.id || e.Idx != next {
			return fmt.Errorf("got record %v for split %q at %d", e, s.id, next)
		}
		if b.fail > 0 && e.Idx == b.fail {
			return errBadGroup
		}
		out.Collect(e)
		next++
	}
	s.next = next // once per group
	return nil
}

func (f *fixture) batchConfig(em *batchRecorder) readerbase.Config[rec, rec, split, *state] {
	cfg := f.config()
	cfg.Emitter = em
	return cfg
}

func newBatchReader(t *testing.T, f *fixture, em *batchRecorder, opts ...readerbase.Option) *readerbase.Reader[rec, rec, split, *state] {
	t.Helper()
	r, err := readerbase.New(f.rctx, f.batchConfig(em), opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// TestBatchEmitterReadAll: a BatchEmitter gets every split's group of
// every batch in one call (never Emit), and every record arrives once,
// in order, on its split's output, with the same metrics, finished splits
// and recycling as the per-record path.
func TestBatchEmitterReadAll(t *testing.T) {
	data := makeData(map[string]int{"a": 10, "b": 0, "c": 25, "d": 7})
	for _, m := range modes {
		for _, bs := range []int{1, 3, 100} {
			t.Run(fmt.Sprintf("%s/batch=%d", m.name, bs), func(t *testing.T) {
				f := newFixture(data, bs)
				em := &batchRecorder{}
				r := newBatchReader(t, f, em, m.opt, readerbase.QueueCapacity(2))
				if err := r.AddSplits(data.splits()); err != nil {
					t.Fatal(err)
				}
				r.NotifyNoMoreSplits()
				out := newFakeOutput()
				drain(t, r, out)
				checkExactlyOnce(t, data, out)
				if em.emits != 0 {
					t.Errorf("Emit called %d times; want only EmitBatch", em.emits)
				}
				// memReader returns one group per batch; empty groups
				// (split "b") are not handed over.
				if got, want := int64(len(em.groups)), f.st.fetches.Load(); got != want-int64(countEmpty(data)) {
					t.Errorf("EmitBatch called %d times for %d batches", got, want)
				}
				for _, n := range em.groups {
					if n < 1 || n > bs {
						t.Errorf("group of %d records; want 1 to %d", n, bs)
					}
				}
				if got, want := f.rctx.reg.Sum(readerbase.MetricRecordsFetched), int64(data.total()); got != want {
					t.Errorf("numRecordsFetched = %d, want %d", got, want)
				}
				if got := slices.Sorted(slices.Values(f.finished)); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
					t.Errorf("OnSplitFinished got %v", got)
				}
				if err := r.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				if got, want := f.st.recycled.Load(), f.st.fetches.Load(); got != want {
					t.Errorf("recycled %d batches, fetched %d", got, want)
				}
			})
		}
	}
}

// countEmpty is the number of splits of data without records: memReader
// returns one empty, finished batch for each.
func countEmpty(d dataset) int {
	n := 0
	for _, rs := range d {
		if len(rs) == 0 {
			n++
		}
	}
	return n
}

// TestBatchEmitterSnapshotRestore: a snapshot between batches holds the
// state EmitBatch left after each group, and a reader restored from it
// (per-record emitter, then batch emitter) reads the rest exactly once.
func TestBatchEmitterSnapshotRestore(t *testing.T) {
	data := makeData(map[string]int{"a": 40, "b": 23, "c": 0, "d": 9})
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f1 := newFixture(data, 4)
				r1 := newBatchReader(t, f1, &batchRecorder{}, m.opt, readerbase.QueueCapacity(3))
				if err := r1.AddSplits(data.splits()); err != nil {
					t.Fatal(err)
				}
				out1 := newFakeOutput()
				for range 3 {
					synctest.Wait()
					if _, err := r1.PollNext(out1); err != nil {
						t.Fatal(err)
					}
				}
				snap, err := r1.SnapshotState(7)
				if err != nil {
					t.Fatal(err)
				}
				if err := r1.Close(); err != nil {
					t.Fatal(err)
				}
				// The snapshot holds exactly what was emitted.
				for _, s := range snap {
					if got := len(out1.bySplit[s.ID]); got != s.Next {
						t.Errorf("split %q: snapshot at %d, %d records emitted", s.ID, s.Next, got)
					}
				}
				f2 := newFixture(data, 4)
				r2 := newBatchReader(t, f2, &batchRecorder{}, m.opt, readerbase.QueueCapacity(3))
				if err := r2.AddSplits(snap); err != nil {
					t.Fatal(err)
				}
				r2.NotifyNoMoreSplits()
				out2 := newFakeOutput()
				drain(t, r2, out2)
				checkExactlyOnce(t, data, out1, out2)
			})
		})
	}
}

// TestBatchEmitterError: an EmitBatch error fails the reader, names the
// split, stays, and numRecordsFetched counts the failed group whole.
func TestBatchEmitterError(t *testing.T) {
	data := makeData(map[string]int{"a": 10})
	f := newFixture(data, 4)
	em := &batchRecorder{fail: 5}
	r := newBatchReader(t, f, em)
	if err := r.AddSplits(data.splits()); err != nil {
		t.Fatal(err)
	}
	out := newFakeOutput()
	_, err := pollUntil(t, r, out, func(source.InputStatus) bool { return false })
	if !errors.Is(err, errBadGroup) || !strings.Contains(err.Error(), `split "a"`) {
		t.Fatalf("PollNext error = %v, want %v naming split \"a\"", err, errBadGroup)
	}
	if _, err := r.PollNext(out); !errors.Is(err, errBadGroup) {
		t.Errorf("second PollNext error = %v, want the same error", err)
	}
	if got := f.rctx.reg.Sum(readerbase.MetricRecordsFetched); got != 8 {
		t.Errorf("numRecordsFetched = %d, want 8 (two groups of 4)", got)
	}
}

// TestBatchEmitterFunc: the adapter's EmitBatch passes the group through
// and its Emit passes one element.
func TestBatchEmitterFunc(t *testing.T) {
	var got [][]rec
	f := readerbase.BatchEmitterFunc[rec, rec, *state](func(es []rec, out source.Output[rec], s *state) error {
		got = append(got, slices.Clone(es))
		for _, e := range es {
			if err := emitRec(e, out, s); err != nil {
				return err
			}
		}
		return nil
	})
	var em readerbase.RecordEmitter[rec, rec, *state] = f
	if _, ok := em.(readerbase.BatchEmitter[rec, rec, *state]); !ok {
		t.Fatal("BatchEmitterFunc is not a BatchEmitter")
	}
	out := newFakeOutput()
	st := &state{id: "a"}
	if err := f.Emit(rec{"a", 0}, out.ForSplit("a"), st); err != nil {
		t.Fatal(err)
	}
	if err := f.EmitBatch([]rec{{"a", 1}, {"a", 2}}, out.ForSplit("a"), st); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got[0]) != 1 || len(got[1]) != 2 || st.next != 3 || len(out.all) != 3 {
		t.Errorf("groups %v, state %d, %d records out", got, st.next, len(out.all))
	}
}
