package datagen

import (
	"testing"

	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/source"
)

// TestPauseOrResumeSplits: a paused split emits nothing while the other
// splits go on; with every split paused the reader waits (not idle) on a
// channel that a resume makes ready; a resumed split continues where it
// stopped; ids the reader does not hold are ignored.
func TestPauseOrResumeSplits(t *testing.T) {
	src := New(ident, Splits(2))
	r, out := newTestReader(t, src, &fakes.ReaderContext{Parallel: 1})
	if err := r.AddSplits(src.InitialSplits()); err != nil {
		t.Fatal(err)
	}
	poll := func(want source.InputStatus) {
		t.Helper()
		if st, err := r.PollNext(out); err != nil || st != want {
			t.Fatalf("PollNext = %v, %v; want %v", st, err, want)
		}
	}
	perSplit := func() map[string]int {
		n := map[string]int{}
		for _, rec := range out.Records {
			n[rec.Split]++
		}
		return n
	}
	if err := r.PauseOrResumeSplits([]string{"split-0", "split-9"}, nil); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		poll(source.MoreAvailable)
	}
	if n := perSplit(); n["split-0"] != 0 || n["split-1"] != 3*BatchSize {
		t.Fatalf("with split-0 paused: %v", n)
	}
	if err := r.PauseOrResumeSplits([]string{"split-1"}, nil); err != nil {
		t.Fatal(err)
	}
	poll(source.NothingAvailable)
	ch := r.Available()
	if isClosed(ch) || out.Idle != 0 {
		t.Fatalf("every split paused: Available ready %v, idle marks %d; want a waiting, active reader", isClosed(ch), out.Idle)
	}
	if err := r.PauseOrResumeSplits(nil, []string{"split-0", "split-7"}); err != nil {
		t.Fatal(err)
	}
	if !isClosed(ch) {
		t.Fatal("Available not ready after a resume")
	}
	poll(source.MoreAvailable)
	if n := perSplit(); n["split-0"] != BatchSize || n["split-1"] != 3*BatchSize {
		t.Fatalf("after resuming split-0: %v", n)
	}
	if first := out.Records[3*BatchSize].Value; first != 0 {
		t.Fatalf("split-0 started at index %d, want 0", first)
	}
	if err := r.PauseOrResumeSplits(nil, []string{"split-1"}); err != nil {
		t.Fatal(err)
	}
	poll(source.MoreAvailable)
	poll(source.MoreAvailable)
	if n := perSplit(); n["split-0"] != 2*BatchSize || n["split-1"] != 4*BatchSize {
		t.Fatalf("both resumed, taking turns: %v", n)
	}
}
