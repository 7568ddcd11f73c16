package readerbase_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/readerbase"
)

// checkExactlyOnce checks that the outputs together hold every record of
// data once, in per-split order, each on its split's output.
func checkExactlyOnce(t *testing.T, data dataset, outs ...*fakeOutput) {
	t.Helper()
	got := map[string][]rec{}
	for _, o := range outs {
		if o.wrongOut != 0 {
			t.Errorf("%d records collected on another split's output", o.wrongOut)
		}
		for id, rs := range o.bySplit {
			got[id] = append(got[id], rs...)
		}
	}
	for id, want := range data {
		if !slices.Equal(got[id], want) {
			t.Errorf("split %q: got %d records %v, want %d records in order", id, len(got[id]), abbrev(got[id]), len(want))
		}
	}
	for id := range got {
		if _, ok := data[id]; !ok {
			t.Errorf("records of unexpected split %q", id)
		}
	}
}

func abbrev(rs []rec) string {
	if len(rs) > 8 {
		return fmt.Sprintf("%v…", rs[:8])
	}
	return fmt.Sprint(rs)
}

func TestReadAll(t *testing.T) {
	data := makeData(map[string]int{"a": 10, "b": 0, "c": 25, "d": 7})
	ids := slices.Sorted(maps.Keys(data))
	for _, m := range modes {
		for _, qc := range []int{1, 2, 8} {
			for _, bs := range []int{1, 3, 100} {
				t.Run(fmt.Sprintf("%s/queue=%d/batch=%d", m.name, qc, bs), func(t *testing.T) {
					f := newFixture(data, bs)
					r := f.newReader(t, m.opt, readerbase.QueueCapacity(qc))
					if err := r.AddSplits(data.splits()); err != nil {
						t.Fatalf("AddSplits: %v", err)
					}
					r.NotifyNoMoreSplits()
					out := newFakeOutput()
					drain(t, r, out)
					checkExactlyOnce(t, data, out)

					if got := slices.Sorted(slices.Values(out.released)); !slices.Equal(got, ids) {
						t.Errorf("released splits = %v, want %v", got, ids)
					}
					if got := slices.Sorted(slices.Values(f.finished)); !slices.Equal(got, ids) {
						t.Errorf("OnSplitFinished got %v, want %v", got, ids)
					}
					if got, want := f.rctx.reg.Sum(readerbase.MetricRecordsFetched), int64(data.total()); got != want {
						t.Errorf("numRecordsIn = %d, want %d", got, want)
					}
					if snap, err := r.SnapshotState(1); err != nil || len(snap) != 0 {
						t.Errorf("SnapshotState at end = %v, %v; want no splits", snap, err)
					}
					if st, err := r.PollNext(out); st != source.EndOfInput || err != nil {
						t.Errorf("PollNext after end = %v, %v; want EndOfInput", st, err)
					}
					if err := r.Close(); err != nil {
						t.Errorf("Close: %v", err)
					}
					if got, want := f.st.closed.Load(), f.st.created.Load(); got != want {
						t.Errorf("closed %d split readers, created %d", got, want)
					}
					if got, want := f.st.recycled.Load(), f.st.fetches.Load(); got != want {
						t.Errorf("recycled %d batches, fetched %d", got, want)
					}
				})
			}
		}
	}
}

// TestNoLostWakeUp races tiny batches through a one-batch queue: a lost
// wake-up would leave the task goroutine waiting on Available forever.
func TestNoLostWakeUp(t *testing.T) {
	data := makeData(map[string]int{"a": 3000, "b": 2000})
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := newFixture(data, 1)
			r := f.newReader(t, m.opt, readerbase.QueueCapacity(1))
			if err := r.AddSplits(data.splits()); err != nil {
				t.Fatal(err)
			}
			r.NotifyNoMoreSplits()
			out := newFakeOutput()
			drain(t, r, out)
			checkExactlyOnce(t, data, out)
		})
	}
}

func TestPollNextNeverBlocks(t *testing.T) {
	// "u" is not in the dataset: its Fetch blocks until ctx is done.
	data := makeData(map[string]int{"a": 5})
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(data, 2)
				r := f.newReader(t, m.opt)
				if err := r.AddSplits([]split{{ID: "u"}}); err != nil {
					t.Fatal(err)
				}
				synctest.Wait() // the fetcher is blocked in Fetch
				out := newFakeOutput()
				for i := range 1000 {
					st, err := r.PollNext(out)
					if err != nil || st != source.NothingAvailable {
						t.Fatalf("PollNext #%d = %v, %v; want NothingAvailable", i, st, err)
					}
				}
				if ready(r.Available()) {
					t.Error("Available is ready although nothing happened")
				}
				snap, err := r.SnapshotState(1)
				if err != nil || !slices.Equal(snap, []split{{ID: "u"}}) {
					t.Errorf("SnapshotState = %v, %v; want [{u 0}]", snap, err)
				}

				// New splits reach a fetcher blocked in Fetch.
				if err := r.AddSplits([]split{{ID: "a"}}); err != nil {
					t.Fatal(err)
				}
				if !ready(r.Available()) {
					t.Error("Available not ready after AddSplits")
				}
				if _, err := pollUntil(t, r, out, func(source.InputStatus) bool { return slices.Contains(out.released, "a") }); err != nil {
					t.Fatal(err)
				}
				checkExactlyOnce(t, dataset{"a": data["a"]}, out)
				snap, err = r.SnapshotState(2)
				if err != nil || !slices.Equal(snap, []split{{ID: "u"}}) {
					t.Errorf("SnapshotState = %v, %v; want [{u 0}]", snap, err)
				}

				closeWithin(t, r)
				if got, want := f.st.closed.Load(), f.st.created.Load(); got != want {
					t.Errorf("closed %d split readers, created %d", got, want)
				}
			})
		})
	}
}

// TestFetcherPerSplitEndsWithSplit checks that with FetcherPerSplit a
// fetcher ends and closes its SplitReader once its split is finished,
// without waiting for Close.
func TestFetcherPerSplitEndsWithSplit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		data := makeData(map[string]int{"a": 3, "b": 4})
		f := newFixture(data, 2)
		r := f.newReader(t, readerbase.FetcherPerSplit())
		if err := r.AddSplits(append(data.splits(), split{ID: "u"})); err != nil {
			t.Fatal(err)
		}
		out := newFakeOutput()
		if _, err := pollUntil(t, r, out, func(source.InputStatus) bool { return len(out.released) == 2 }); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := f.st.closed.Load(); got != 2 {
			t.Errorf("closed %d split readers after a and b finished, want 2", got)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if got := f.st.closed.Load(); got != 3 {
			t.Errorf("closed %d split readers after Close, want 3", got)
		}
		checkExactlyOnce(t, data, out)
	})
}

// closeWithin closes r and fails if Close hangs.
func closeWithin(t *testing.T, r interface{ Close() error }) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(hang):
		t.Fatalf("Close did not return within %v", hang)
	}
}

func TestSnapshotRestore(t *testing.T) {
	data := makeData(map[string]int{"a": 40, "b": 23, "c": 0, "d": 9})
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f1 := newFixture(data, 4)
				r1 := f1.newReader(t, m.opt, readerbase.QueueCapacity(3))
				if err := r1.AddSplits(data.splits()); err != nil {
					t.Fatal(err)
				}
				out1 := newFakeOutput()
				for range 3 {
					synctest.Wait() // the fetchers fill the queue
					if _, err := r1.PollNext(out1); err != nil {
						t.Fatal(err)
					}
				}
				synctest.Wait()
				if fetched, emitted := f1.st.fetches.Load(), f1.st.recycled.Load(); fetched <= emitted {
					t.Fatalf("fetched %d batches, emitted %d: nothing waits in the queue", fetched, emitted)
				}
				snap, err := r1.SnapshotState(7)
				if err != nil {
					t.Fatal(err)
				}
				if err := r1.Close(); err != nil {
					t.Fatal(err)
				}

				f2 := newFixture(data, 4)
				r2 := f2.newReader(t, m.opt, readerbase.QueueCapacity(3))
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

func TestEndOfInput(t *testing.T) {
	t.Run("no splits", func(t *testing.T) {
		for _, m := range modes {
			f := newFixture(dataset{}, 1)
			r := f.newReader(t, m.opt, readerbase.PullSplits())
			r.NotifyNoMoreSplits()
			if st, err := r.PollNext(newFakeOutput()); st != source.EndOfInput || err != nil {
				t.Errorf("%s: PollNext = %v, %v; want EndOfInput", m.name, st, err)
			}
			if f.rctx.requests != 0 {
				t.Errorf("%s: %d split requests after NotifyNoMoreSplits, want 0", m.name, f.rctx.requests)
			}
		}
	})

	t.Run("waits for NotifyNoMoreSplits", func(t *testing.T) {
		data := makeData(map[string]int{"a": 5})
		for _, m := range modes {
			f := newFixture(data, 2)
			r := f.newReader(t, m.opt)
			if err := r.AddSplits(data.splits()); err != nil {
				t.Fatal(err)
			}
			out := newFakeOutput()
			if _, err := pollUntil(t, r, out, func(source.InputStatus) bool { return slices.Contains(out.released, "a") }); err != nil {
				t.Fatal(err)
			}
			for i := range 100 {
				if st, err := r.PollNext(out); st != source.NothingAvailable || err != nil {
					t.Fatalf("%s: PollNext #%d before NotifyNoMoreSplits = %v, %v; want NothingAvailable", m.name, i, st, err)
				}
			}
			if ready(r.Available()) {
				t.Errorf("%s: Available ready before NotifyNoMoreSplits", m.name)
			}
			r.NotifyNoMoreSplits()
			if !ready(r.Available()) {
				t.Errorf("%s: Available not ready after NotifyNoMoreSplits", m.name)
			}
			for range 2 {
				if st, err := r.PollNext(out); st != source.EndOfInput || err != nil {
					t.Errorf("%s: PollNext = %v, %v; want EndOfInput", m.name, st, err)
				}
			}
			checkExactlyOnce(t, data, out)
		}
	})

	t.Run("queue holds batches", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			data := makeData(map[string]int{"a": 5})
			f := newFixture(data, 1)
			r := f.newReader(t, readerbase.QueueCapacity(8))
			if err := r.AddSplits(data.splits()); err != nil {
				t.Fatal(err)
			}
			r.NotifyNoMoreSplits()
			synctest.Wait() // all five batches, the last finishing "a", are queued
			out := newFakeOutput()
			want := []source.InputStatus{source.MoreAvailable, source.MoreAvailable, source.MoreAvailable, source.MoreAvailable, source.EndOfInput}
			for i, w := range want {
				st, err := r.PollNext(out)
				if st != w || err != nil {
					t.Fatalf("PollNext #%d = %v, %v; want %v", i, st, err, w)
				}
				if len(out.all) != i+1 {
					t.Fatalf("after PollNext #%d: %d records emitted, want %d", i, len(out.all), i+1)
				}
			}
		})
	})
}

func TestPullSplits(t *testing.T) {
	data := makeData(map[string]int{"a": 3, "b": 2})
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := newFixture(data, 2)
			r := f.newReader(t, m.opt, readerbase.PullSplits())
			if f.rctx.requests != 0 {
				t.Fatalf("requests after Start = %d, want 0 (the first PollNext asks)", f.rctx.requests)
			}
			out := newFakeOutput()
			for i := range 10 {
				if st, err := r.PollNext(out); st != source.NothingAvailable || err != nil {
					t.Fatalf("PollNext = %v, %v; want NothingAvailable", st, err)
				}
				if f.rctx.requests != 1 {
					t.Fatalf("requests after PollNext #%d = %d, want 1", i, f.rctx.requests)
				}
			}
			for i, id := range []string{"a", "b"} {
				if err := r.AddSplits([]split{{ID: id}}); err != nil {
					t.Fatal(err)
				}
				if _, err := pollUntil(t, r, out, func(source.InputStatus) bool { return slices.Contains(out.released, id) }); err != nil {
					t.Fatal(err)
				}
				if got, want := f.rctx.requests, i+2; got != want {
					t.Fatalf("requests after split %q finished = %d, want %d", id, got, want)
				}
			}
			r.NotifyNoMoreSplits()
			if st, err := r.PollNext(out); st != source.EndOfInput || err != nil {
				t.Fatalf("PollNext = %v, %v; want EndOfInput", st, err)
			}
			if f.rctx.requests != 3 {
				t.Errorf("requests = %d, want 3", f.rctx.requests)
			}
			checkExactlyOnce(t, data, out)
		})
	}

	t.Run("restored splits first", func(t *testing.T) {
		f := newFixture(data, 1)
		r := f.newReader(t, readerbase.PullSplits())
		if err := r.AddSplits([]split{{ID: "a", Next: 1}}); err != nil {
			t.Fatal(err)
		}
		out := newFakeOutput()
		_, err := pollUntil(t, r, out, func(source.InputStatus) bool {
			done := slices.Contains(out.released, "a")
			if !done && f.rctx.requests != 0 {
				t.Fatalf("requested a split while the restored split is unfinished")
			}
			return done
		})
		if err != nil {
			t.Fatal(err)
		}
		if f.rctx.requests != 1 {
			t.Errorf("requests = %d, want 1", f.rctx.requests)
		}
		if got, want := out.bySplit["a"], data["a"][1:]; !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}

func TestFetchError(t *testing.T) {
	data := makeData(map[string]int{"a": 10})
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := newFixture(data, 2)
			f.failAfter = 2
			r := f.newReader(t, m.opt)
			if err := r.AddSplits(data.splits()); err != nil {
				t.Fatal(err)
			}
			r.NotifyNoMoreSplits()
			out := newFakeOutput()
			st, err := pollUntil(t, r, out, func(source.InputStatus) bool { return false })
			if !errors.Is(err, errBoom) {
				t.Fatalf("PollNext = %v, %v; want an error wrapping %v", st, err, errBoom)
			}
			if !strings.Contains(err.Error(), "fetcher 0 (splits a)") {
				t.Errorf("error %q does not name the fetcher and its split", err)
			}
			if _, err2 := r.PollNext(out); !errors.Is(err2, errBoom) {
				t.Errorf("second PollNext error = %v, want the same error", err2)
			}
			closeWithin(t, r)
			if got, want := f.st.closed.Load(), f.st.created.Load(); got != want {
				t.Errorf("closed %d split readers, created %d", got, want)
			}
		})
	}
}

func TestEmitterError(t *testing.T) {
	data := makeData(map[string]int{"a": 10})
	f := newFixture(data, 4)
	cfg := f.config()
	errBad := errors.New("bad record")
	cfg.Emitter = readerbase.EmitterFunc[rec, rec, *state](func(e rec, out source.Output[rec], s *state) error {
		if e.Idx == 5 {
			return errBad
		}
		return emitRec(e, out, s)
	})
	r, err := readerbase.New(f.rctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := r.AddSplits(data.splits()); err != nil {
		t.Fatal(err)
	}
	out := newFakeOutput()
	_, err = pollUntil(t, r, out, func(source.InputStatus) bool { return false })
	if !errors.Is(err, errBad) || !strings.Contains(err.Error(), `split "a"`) {
		t.Fatalf("PollNext error = %v, want %v naming split \"a\"", err, errBad)
	}
	if _, err := r.PollNext(out); !errors.Is(err, errBad) {
		t.Errorf("second PollNext error = %v, want the same error", err)
	}
	if got := f.rctx.reg.Sum(readerbase.MetricRecordsFetched); got != 5 {
		t.Errorf("numRecordsIn = %d, want 5", got)
	}
}

// funcReader is a SplitReader made of functions.
type funcReader struct {
	fetch func(ctx context.Context) (readerbase.Batch[rec], error)
}

func (f funcReader) Fetch(ctx context.Context) (readerbase.Batch[rec], error) { return f.fetch(ctx) }
func (funcReader) AddSplits([]split) error                                    { return nil }
func (funcReader) Close() error                                               { return nil }

func TestUnknownSplit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		batch readerbase.Batch[rec]
	}{
		{"records", readerbase.Batch[rec]{Records: []readerbase.SplitRecords[rec]{{SplitID: "zzz", Records: []rec{{"zzz", 0}}}}}},
		{"finished", readerbase.Batch[rec]{Finished: []string{"zzz"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(nil, 1)
			cfg := f.config()
			sent := false
			cfg.NewSplitReader = func() (readerbase.SplitReader[rec, split], error) {
				return funcReader{fetch: func(ctx context.Context) (readerbase.Batch[rec], error) {
					if !sent {
						sent = true
						return tc.batch, nil
					}
					<-ctx.Done()
					return readerbase.Batch[rec]{}, ctx.Err()
				}}, nil
			}
			r, err := readerbase.New(f.rctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := r.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := r.AddSplits([]split{{ID: "a"}}); err != nil {
				t.Fatal(err)
			}
			_, err = pollUntil(t, r, newFakeOutput(), func(source.InputStatus) bool { return false })
			if !errors.Is(err, readerbase.ErrUnknownSplit) {
				t.Fatalf("PollNext error = %v, want %v", err, readerbase.ErrUnknownSplit)
			}
		})
	}
}

func TestBackpressure(t *testing.T) {
	const records = 40
	data := makeData(map[string]int{"a": records})
	for _, qc := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("queue=%d", qc), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(data, 1)
				r := f.newReader(t, readerbase.QueueCapacity(qc))
				if err := r.AddSplits(data.splits()); err != nil {
					t.Fatal(err)
				}
				r.NotifyNoMoreSplits()
				out := newFakeOutput()
				for i := range records + 1 {
					synctest.Wait() // the fetcher is blocked on the full queue, or done
					fetched, emitted := f.st.fetches.Load(), f.st.recycled.Load()
					// qc batches queued, one in the fetcher's hands.
					if want := min(emitted+int64(qc)+1, records); fetched != want {
						t.Fatalf("after %d batches emitted: fetched %d, want %d", emitted, fetched, want)
					}
					st, err := r.PollNext(out)
					if err != nil {
						t.Fatal(err)
					}
					if st == source.EndOfInput {
						if i != records-1 {
							t.Fatalf("EndOfInput after %d polls, want %d", i+1, records)
						}
						break
					}
				}
				checkExactlyOnce(t, data, out)
			})
		})
	}

	t.Run("close while blocked", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			for _, m := range modes {
				f := newFixture(data, 1)
				r := f.newReader(t, m.opt, readerbase.QueueCapacity(1))
				if err := r.AddSplits(data.splits()); err != nil {
					t.Fatal(err)
				}
				synctest.Wait() // blocked on the full queue
				if err := r.Close(); err != nil {
					t.Errorf("%s: Close: %v", m.name, err)
				}
				if got := f.st.closed.Load(); got != 1 {
					t.Errorf("%s: closed %d split readers, want 1", m.name, got)
				}
			}
		})
	})
}

// TestTasksWhileBlockedOnFullQueue checks that a fetcher blocked on the
// full queue still takes new splits.
func TestTasksWhileBlockedOnFullQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		data := makeData(map[string]int{"a": 10, "b": 3})
		f := newFixture(data, 1)
		r := f.newReader(t, readerbase.QueueCapacity(1))
		if err := r.AddSplits([]split{{ID: "a"}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := r.AddSplits([]split{{ID: "b"}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := f.st.addedIDs(); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("SplitReader got splits %v, want [a b]", got)
		}
		if got := f.st.recycled.Load(); got != 0 {
			t.Fatalf("%d batches emitted, want 0", got)
		}
		r.NotifyNoMoreSplits()
		out := newFakeOutput()
		drain(t, r, out)
		checkExactlyOnce(t, data, out)
	})
}

func TestPauseResume(t *testing.T) {
	data := makeData(map[string]int{"a": 6, "b": 4})
	for _, tc := range []struct {
		name     string
		opt      readerbase.Option
		pausable bool
	}{
		{"single/pausable", readerbase.SingleFetcher(), true},
		{"perSplit/pausable", readerbase.FetcherPerSplit(), true},
		{"perSplit/plain", readerbase.FetcherPerSplit(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				gate := make(chan struct{})
				f := newFixture(data, 2)
				f.gate, f.pausable = gate, tc.pausable
				r := f.newReader(t, tc.opt)
				if err := r.AddSplits(data.splits()); err != nil {
					t.Fatal(err)
				}
				// The SplitReader is still adding "a" when the pause comes.
				if err := r.PauseOrResumeSplits([]string{"a", "unknown"}, nil); err != nil {
					t.Fatalf("PauseOrResumeSplits: %v", err)
				}
				close(gate)
				r.NotifyNoMoreSplits()
				out := newFakeOutput()
				if _, err := pollUntil(t, r, out, func(source.InputStatus) bool { return slices.Contains(out.released, "b") }); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				if st, err := r.PollNext(out); st != source.NothingAvailable || err != nil {
					t.Fatalf("PollNext with a paused = %v, %v; want NothingAvailable", st, err)
				}
				if ready(r.Available()) {
					t.Error("Available ready while the only split is paused")
				}
				if n := f.st.fetchedOf("a"); n != 0 || len(out.bySplit["a"]) != 0 {
					t.Fatalf("paused split a: %d records fetched, %d emitted; want none", n, len(out.bySplit["a"]))
				}
				if snap, err := r.SnapshotState(1); err != nil || !slices.Equal(snap, []split{{ID: "a"}}) {
					t.Errorf("SnapshotState = %v, %v; want [{a 0}]", snap, err)
				}
				if err := r.PauseOrResumeSplits(nil, []string{"a"}); err != nil {
					t.Fatalf("resume: %v", err)
				}
				drain(t, r, out)
				checkExactlyOnce(t, data, out)
			})
		})
	}

	t.Run("single/unsupported", func(t *testing.T) {
		f := newFixture(data, 2)
		r := f.newReader(t)
		if err := r.PauseOrResumeSplits([]string{"a"}, nil); err != nil {
			t.Errorf("pausing a split the reader does not hold: %v, want nil", err)
		}
		if err := r.AddSplits([]split{{ID: "a"}}); err != nil {
			t.Fatal(err)
		}
		if err := r.PauseOrResumeSplits([]string{"a"}, nil); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("PauseOrResumeSplits = %v, want %v", err, errors.ErrUnsupported)
		}
		if err := r.PauseOrResumeSplits(nil, []string{"a"}); err != nil {
			t.Errorf("resume = %v, want nil", err)
		}
	})
}

func TestClose(t *testing.T) {
	t.Run("before Start, twice", func(t *testing.T) {
		f := newFixture(nil, 1)
		r, err := readerbase.New(f.rctx, f.config())
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := r.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
		if err := r.Start(t.Context()); !errors.Is(err, readerbase.ErrClosed) {
			t.Errorf("Start after Close = %v, want ErrClosed", err)
		}
	})

	t.Run("SplitReader close error", func(t *testing.T) {
		for _, m := range modes {
			errClose := errors.New("close failed")
			f := newFixture(dataset{}, 1)
			f.closeErr = errClose
			r := f.newReader(t, m.opt)
			if err := r.AddSplits([]split{{ID: "u"}, {ID: "v"}}); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := r.Close(); !errors.Is(err, errClose) {
					t.Errorf("%s: Close = %v, want %v", m.name, err, errClose)
				}
			}
			if got, want := f.st.closed.Load(), f.st.created.Load(); got != want {
				t.Errorf("%s: closed %d split readers, created %d", m.name, got, want)
			}
		}
	})

	t.Run("methods after Close", func(t *testing.T) {
		f := newFixture(dataset{}, 1)
		r := f.newReader(t)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.PollNext(newFakeOutput()); !errors.Is(err, readerbase.ErrClosed) {
			t.Errorf("PollNext = %v, want ErrClosed", err)
		}
		if err := r.AddSplits([]split{{ID: "a"}}); !errors.Is(err, readerbase.ErrClosed) {
			t.Errorf("AddSplits = %v, want ErrClosed", err)
		}
		if _, err := r.SnapshotState(1); !errors.Is(err, readerbase.ErrClosed) {
			t.Errorf("SnapshotState = %v, want ErrClosed", err)
		}
		if err := r.PauseOrResumeSplits([]string{"a"}, nil); !errors.Is(err, readerbase.ErrClosed) {
			t.Errorf("PauseOrResumeSplits = %v, want ErrClosed", err)
		}
	})

	t.Run("Start ctx cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			for _, m := range modes {
				f := newFixture(dataset{}, 1)
				r, err := readerbase.New(f.rctx, f.config(), m.opt)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				if err := r.Start(ctx); err != nil {
					t.Fatal(err)
				}
				if err := r.AddSplits([]split{{ID: "u"}, {ID: "v"}}); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				cancel()
				synctest.Wait() // the fetchers end by themselves
				if got, want := f.st.closed.Load(), f.st.created.Load(); got != want {
					t.Errorf("%s: closed %d split readers, created %d", m.name, got, want)
				}
				if err := r.Close(); err != nil {
					t.Errorf("%s: Close: %v", m.name, err)
				}
			}
		})
	})
}

func TestNewInvalidConfig(t *testing.T) {
	f := newFixture(nil, 1)
	for _, tc := range []struct {
		name   string
		modify func(*readerbase.Config[rec, rec, split, *state])
		opts   []readerbase.Option
	}{
		{"NewSplitReader", func(c *readerbase.Config[rec, rec, split, *state]) { c.NewSplitReader = nil }, nil},
		{"Emitter", func(c *readerbase.Config[rec, rec, split, *state]) { c.Emitter = nil }, nil},
		{"InitState", func(c *readerbase.Config[rec, rec, split, *state]) { c.InitState = nil }, nil},
		{"ToSplit", func(c *readerbase.Config[rec, rec, split, *state]) { c.ToSplit = nil }, nil},
		{"QueueCapacity", func(*readerbase.Config[rec, rec, split, *state]) {}, []readerbase.Option{readerbase.QueueCapacity(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := f.config()
			tc.modify(&cfg)
			_, err := readerbase.New(f.rctx, cfg, tc.opts...)
			if !errors.Is(err, readerbase.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.name) {
				t.Errorf("New = %v, want ErrInvalidConfig naming %s", err, tc.name)
			}
		})
	}
	if _, err := readerbase.New(nil, f.config()); !errors.Is(err, readerbase.ErrInvalidConfig) {
		t.Errorf("New with nil ReaderContext = %v, want ErrInvalidConfig", err)
	}
}

func TestAddSplitsErrors(t *testing.T) {
	t.Run("before Start", func(t *testing.T) {
		f := newFixture(nil, 1)
		r, err := readerbase.New(f.rctx, f.config())
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if err := r.AddSplits([]split{{ID: "a"}}); !errors.Is(err, readerbase.ErrNotStarted) {
			t.Errorf("AddSplits = %v, want ErrNotStarted", err)
		}
	})
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := newFixture(dataset{}, 1)
			r := f.newReader(t, m.opt)
			if err := r.AddSplits([]split{{ID: "u"}}); err != nil {
				t.Fatal(err)
			}
			for _, ss := range [][]split{{{ID: "u"}}, {{ID: "v"}, {ID: "v"}}} {
				if err := r.AddSplits(ss); !errors.Is(err, readerbase.ErrDuplicateSplit) {
					t.Errorf("AddSplits(%v) = %v, want ErrDuplicateSplit", ss, err)
				}
			}
			if snap, _ := r.SnapshotState(1); len(snap) != 1 {
				t.Errorf("SnapshotState = %v, want only u", snap)
			}
			r.NotifyNoMoreSplits()
			if err := r.AddSplits([]split{{ID: "w"}}); !errors.Is(err, readerbase.ErrSplitsAfterNoMoreSplits) {
				t.Errorf("AddSplits after NotifyNoMoreSplits = %v, want ErrSplitsAfterNoMoreSplits", err)
			}
		})
	}
	t.Run("NewSplitReader fails", func(t *testing.T) {
		for _, m := range modes {
			f := newFixture(dataset{}, 1)
			cfg := f.config()
			errNew := errors.New("no connection")
			calls := 0
			cfg.NewSplitReader = func() (readerbase.SplitReader[rec, split], error) {
				calls++
				if calls == 2 {
					return nil, errNew
				}
				f.st.created.Add(1)
				return &memReader{st: f.st}, nil
			}
			r, err := readerbase.New(f.rctx, cfg, m.opt)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			ss := []split{{ID: "u"}, {ID: "v"}}
			if m.name == "single" {
				calls = 1 // the first call fails
			}
			if err := r.AddSplits(ss); !errors.Is(err, errNew) {
				t.Errorf("%s: AddSplits = %v, want %v", m.name, err, errNew)
			}
			if snap, _ := r.SnapshotState(1); len(snap) != 0 {
				t.Errorf("%s: SnapshotState = %v after a failed AddSplits, want none", m.name, snap)
			}
			if err := r.Close(); err != nil {
				t.Errorf("%s: Close: %v", m.name, err)
			}
			if got, want := f.st.closed.Load(), f.st.created.Load(); got != want {
				t.Errorf("%s: closed %d split readers, created %d", m.name, got, want)
			}
		}
	})
}

// TestSplitReaderPanic: a panic in a SplitReader on a fetcher goroutine
// does not crash the process: the fetcher recovers, PollNext re-raises it
// on the caller's goroutine as a *PanicError naming the fetcher, its splits
// and the value (the stack is kept aside), later calls return it as an
// error, and Close still closes every SplitReader and waits for every
// fetcher (TestMain checks for leaked goroutines). A panic in Close comes
// back from Close as an error.
func TestSplitReaderPanic(t *testing.T) {
	data := makeData(map[string]int{"a": 10, "b": 10})
	for _, m := range modes {
		for _, where := range []string{"fetch", "add"} {
			t.Run(m.name+"/"+where, func(t *testing.T) {
				f := newFixture(data, 2)
				f.panicIn = where
				r := f.newReader(t, m.opt)
				if err := r.AddSplits(data.splits()); err != nil {
					t.Fatal(err)
				}
				r.NotifyNoMoreSplits()
				out := newFakeOutput()
				var pe *readerbase.PanicError
				func() {
					defer func() {
						v := recover()
						var ok bool
						if pe, ok = v.(*readerbase.PanicError); !ok {
							t.Fatalf("PollNext panicked with %T %v, want a *readerbase.PanicError", v, v)
						}
					}()
					st, err := pollUntil(t, r, out, func(source.InputStatus) bool { return false })
					t.Fatalf("PollNext returned %v, %v; want a panic", st, err)
				}()
				if !strings.Contains(pe.Error(), "fetcher") || !strings.Contains(pe.Error(), "panicked") || len(pe.Splits) == 0 {
					t.Errorf("panic error %q does not name the fetcher, its splits and the panic", pe)
				}
				if where == "fetch" && pe.Value != "fetch went wrong" {
					t.Errorf("panic value %v, want the SplitReader's", pe.Value)
				}
				if where == "add" && !errors.Is(pe, errBoom) {
					t.Errorf("panic error %v does not wrap the panic value %v", pe, errBoom)
				}
				if !strings.Contains(string(pe.Stack()), "memReader") {
					t.Errorf("stack does not show the SplitReader:\n%s", pe.Stack())
				}
				if _, err := r.PollNext(out); !errors.Is(err, pe) {
					t.Errorf("PollNext after the panic: %v, want the PanicError", err)
				}
				closeWithin(t, r)
				if got, want := f.st.closed.Load(), f.st.created.Load(); got != want {
					t.Errorf("closed %d split readers, created %d", got, want)
				}
			})
		}
		t.Run(m.name+"/close", func(t *testing.T) {
			f := newFixture(data, 2)
			f.panicIn = "close"
			r := f.newReader(t, m.opt)
			if err := r.AddSplits(data.splits()); err != nil {
				t.Fatal(err)
			}
			r.NotifyNoMoreSplits()
			out := newFakeOutput()
			var raised any
			func() {
				defer func() { raised = recover() }()
				if st, err := pollUntil(t, r, out, func(source.InputStatus) bool { return false }); err != nil || st != source.EndOfInput {
					t.Errorf("PollNext = %v, %v; want EndOfInput", st, err)
				}
			}()
			var pe *readerbase.PanicError
			if m.name == "perSplit" && raised != nil {
				// A fetcher per split closes its SplitReader when the
				// split ends, so PollNext re-raises the panic if it comes
				// before the end of input is seen; otherwise Close
				// returns it (below).
				if pe, _ = raised.(*readerbase.PanicError); pe == nil || pe.In != "SplitReader.Close" {
					t.Fatalf("PollNext panicked with %v, want the PanicError of SplitReader.Close", raised)
				}
				closeWithin(t, r)
				return
			}
			if raised != nil {
				t.Fatalf("PollNext panicked with %v", raised)
			}
			if err := r.Close(); !errors.As(err, &pe) || !errors.Is(err, errBoom) || pe.In != "SplitReader.Close" {
				t.Fatalf("Close = %v, want a PanicError of SplitReader.Close wrapping %v", err, errBoom)
			}
		})
	}
}
