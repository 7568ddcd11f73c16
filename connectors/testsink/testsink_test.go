package testsink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/internal/sinkerase"
	"github.com/sluice-io/sluice/internal/sinkrt"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/sink"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newWriter(t *testing.T, s sink.Sink[int], ic *fakes.InitContext) *sinkerase.Writer[int] {
	t.Helper()
	w, err := sinkerase.Open(context.Background(), sinkerase.Erase(s), ic, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func write(t *testing.T, w sink.Writer[int], vs ...int) {
	t.Helper()
	for _, v := range vs {
		if err := w.Write(context.Background(), v, sink.Meta{}); err != nil {
			t.Fatal(err)
		}
	}
}

func prepare(t *testing.T, w *sinkerase.Writer[int], id int64) []*sinkrt.Request {
	t.Helper()
	if err := w.Flush(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	cs, err := w.PrepareCommit(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]*sinkrt.Request, len(cs))
	for i, c := range cs {
		reqs[i] = &sinkrt.Request{CheckpointID: id, Data: c}
	}
	return reqs
}

func commit(t *testing.T, s sink.Sink[int], reqs []*sinkrt.Request) {
	t.Helper()
	c, err := sinkerase.Erase(s).NewCommitter(context.Background(), &fakes.InitContext{})
	if err != nil || c == nil {
		t.Fatalf("NewCommitter = %v, %v", c, err)
	}
	defer c.Close()
	for _, r := range reqs {
		r.Outcome, r.Err = -1, nil
	}
	if err := c.Commit(context.Background(), reqs); err != nil {
		t.Fatal(err)
	}
}

func TestNothingVisibleBeforeCommit(t *testing.T) {
	store := NewStore[int]()
	s := NewTwoPhase(store)
	if d := sinkerase.Erase(s).Describe(); !strings.Contains(d, "two-phase") {
		t.Fatalf("Describe = %q", d)
	}
	ic := &fakes.InitContext{Subtask: 1, Parallel: 2, Job: "j", Operator: "op"}
	w := newWriter(t, s, ic)
	write(t, w, 1, 2, 3)
	if err := w.Flush(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if len(store.Staged()) != 0 || len(store.Committed()) != 0 {
		t.Fatal("records left the writer before PrepareCommit")
	}
	reqs := prepare(t, w, 7)
	if got := store.Staged(); !slices.Equal(got, []string{"j/op/1/7"}) {
		t.Fatalf("staged %v", got)
	}
	if got := store.StagedRecords("j/op/1/7"); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("staged records %v", got)
	}
	if len(store.Committed()) != 0 {
		t.Fatal("prepared records visible before commit")
	}
	if _, err := store.Final(); err == nil || !strings.Contains(err.Error(), "j/op/1/7") {
		t.Fatalf("Final with a staged txn: %v", err)
	}
	c, err := serde.Unmarshal(committableSerde, reqs[0].Data)
	if err != nil || c.TxnID != "j/op/1/7" {
		t.Fatalf("committable %+v, %v", c, err)
	}

	commit(t, s, reqs)
	if reqs[0].Outcome != sinkrt.Committed {
		t.Fatalf("outcome %v (%v)", reqs[0].Outcome, reqs[0].Err)
	}
	got, err := store.Final()
	if err != nil || !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("Final = %v, %v", got, err)
	}
	txns := store.CommittedTxns()
	if len(txns) != 1 || txns[0].Subtask != 1 || txns[0].CheckpointID != 7 || !store.IsCommitted("j/op/1/7") {
		t.Fatalf("committed txns %+v", txns)
	}
	// An empty buffer prepares nothing.
	if reqs := prepare(t, w, 8); len(reqs) != 0 {
		t.Fatalf("empty prepare returned %d committables", len(reqs))
	}
}

func TestCommitOutcomes(t *testing.T) {
	store := NewStore[int]()
	s := NewTwoPhase(store)
	w := newWriter(t, s, &fakes.InitContext{})
	write(t, w, 1)
	first := prepare(t, w, 1)
	write(t, w, 2)
	second := prepare(t, w, 2)
	commit(t, s, first)

	unknown, _ := serde.Marshal(committableSerde, committable{TxnID: "job/sink/0/99"})
	reqs := []*sinkrt.Request{first[0], second[0], {CheckpointID: 99, Data: unknown}}
	commit(t, s, reqs)
	want := []sinkrt.Outcome{sinkrt.AlreadyCommitted, sinkrt.Committed, sinkrt.FailedUnknown}
	for i, r := range reqs {
		if r.Outcome != want[i] {
			t.Errorf("request %d: %v (%v), want %v", i, r.Outcome, r.Err, want[i])
		}
	}
	if !errors.Is(reqs[2].Err, ErrTxnUnknown) || !strings.Contains(reqs[2].Err.Error(), "job/sink/0/99") {
		t.Errorf("unknown txn error: %v", reqs[2].Err)
	}
	if got := store.Committed(); !slices.Equal(got, []int{1, 2}) || store.CommitCount() != 2 {
		t.Fatalf("committed %v (%d txns)", got, store.CommitCount())
	}
}

func TestPrepareReusedIDFails(t *testing.T) {
	store := NewStore[int]()
	s := NewTwoPhase(store)
	w := newWriter(t, s, &fakes.InitContext{})
	write(t, w, 1)
	reqs := prepare(t, w, 1)
	write(t, w, 2)
	if _, err := w.PrepareCommit(context.Background(), 1); err == nil || !strings.Contains(err.Error(), "already staged") {
		t.Fatalf("second prepare of checkpoint 1: %v", err)
	}
	commit(t, s, reqs)
	w2 := newWriter(t, s, &fakes.InitContext{})
	write(t, w2, 3)
	if _, err := w2.PrepareCommit(context.Background(), 1); err == nil || !strings.Contains(err.Error(), "already committed") {
		t.Fatalf("prepare of a committed id: %v", err)
	}
}

func TestAbortOnRecovery(t *testing.T) {
	// Staged before the "failure": subtasks 0..3 of an old parallelism of 4,
	// plus other operators' and jobs' transactions that must be left alone.
	stagedBefore := []struct {
		job, op string
		sub     int
		ckpt    int64
	}{
		{"j", "s", 0, 1}, {"j", "s", 0, 2}, {"j", "s", 0, 3},
		{"j", "s", 1, 2}, {"j", "s", 1, 3},
		{"j", "s", 3, 4},
		{"j", "other", 0, 5}, {"k", "s", 0, 5},
	}
	tests := []struct {
		name      string
		ic        fakes.InitContext
		wantAbort []string
	}{
		{"fresh start aborts nothing",
			fakes.InitContext{Job: "j", Operator: "s", Parallel: 4}, nil},
		{"restored from 2 keeps <= 2",
			fakes.InitContext{Job: "j", Operator: "s", Parallel: 4, AttemptNum: 1, Restored: 2, HasRestored: true},
			[]string{"j/s/0/3"}},
		{"subtask 1 restored from 2",
			fakes.InitContext{Job: "j", Operator: "s", Subtask: 1, Parallel: 4, AttemptNum: 1, Restored: 2, HasRestored: true},
			[]string{"j/s/1/3"}},
		{"restart without a completed checkpoint aborts all",
			fakes.InitContext{Job: "j", Operator: "s", Parallel: 4, AttemptNum: 1},
			[]string{"j/s/0/1", "j/s/0/2", "j/s/0/3"}},
		{"restore at attempt 0 (savepoint) aborts too",
			fakes.InitContext{Job: "j", Operator: "s", Parallel: 4, Restored: 1, HasRestored: true},
			[]string{"j/s/0/2", "j/s/0/3"}},
		{"scaled down to 2: subtask 0 cleans up subtask 3",
			fakes.InitContext{Job: "j", Operator: "s", Parallel: 2, AttemptNum: 1, Restored: 3, HasRestored: true},
			[]string{"j/s/3/4"}},
		{"scaled down to 2: subtask 1 does not",
			fakes.InitContext{Job: "j", Operator: "s", Subtask: 1, Parallel: 2, AttemptNum: 1, Restored: 2, HasRestored: true},
			[]string{"j/s/1/3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := NewStore[int]()
			var all []string
			for i, st := range stagedBefore {
				w := newWriter(t, NewTwoPhase(store), &fakes.InitContext{Job: st.job, Operator: st.op, Subtask: st.sub, Parallel: 4})
				write(t, w, i)
				prepare(t, w, st.ckpt)
				all = append(all, TxnID(st.job, st.op, st.sub, st.ckpt))
			}
			newWriter(t, NewTwoPhase(store), &tt.ic)
			if got := store.Aborted(); !slices.Equal(got, tt.wantAbort) {
				t.Fatalf("aborted %v, want %v", got, tt.wantAbort)
			}
			want := slices.DeleteFunc(all, func(id string) bool { return slices.Contains(tt.wantAbort, id) })
			slices.Sort(want)
			if got := store.Staged(); !slices.Equal(got, want) {
				t.Fatalf("staged %v, want %v", got, want)
			}
		})
	}
}

func TestRecoveryEndToEnd(t *testing.T) {
	// Attempt 0 prepares checkpoints 1 and 2; only 1 completes and is
	// committed... then the job fails before committing anything of 2.
	store := NewStore[int]()
	s := NewTwoPhase(store)
	w := newWriter(t, s, &fakes.InitContext{})
	write(t, w, 1, 2)
	c1 := prepare(t, w, 1)
	write(t, w, 3)
	prepare(t, w, 2) // checkpoint 2 never completes
	write(t, w, 4)   // lost with the attempt
	w.Close()

	// Attempt 1 restores checkpoint 1: its committables are committed
	// (again, or for the first time), txn 2 is aborted, input replays 3, 4.
	w2 := newWriter(t, s, &fakes.InitContext{AttemptNum: 1, Restored: 1, HasRestored: true})
	commit(t, s, c1)
	write(t, w2, 3, 4)
	c3 := prepare(t, w2, 3)
	commit(t, s, c3)
	got, err := store.Final()
	if err != nil || !slices.Equal(got, []int{1, 2, 3, 4}) {
		t.Fatalf("Final = %v, %v", got, err)
	}
}

func TestGlobalCommit(t *testing.T) {
	store := NewStore[int]()
	plain := sinkerase.Erase(NewTwoPhase(store))
	if g, err := plain.NewGlobalCommitter(context.Background(), &fakes.InitContext{}); g != nil || err != nil {
		t.Fatalf("sink without WithGlobalCommit has a global committer: %v, %v", g, err)
	}
	s := NewTwoPhase(store, WithGlobalCommit())
	var reqs []*sinkrt.Request
	for sub := range 2 {
		w := newWriter(t, s, &fakes.InitContext{Subtask: sub, Parallel: 2})
		write(t, w, sub)
		reqs = append(reqs, prepare(t, w, 4)...)
	}
	g, err := sinkerase.Erase(s).NewGlobalCommitter(context.Background(), &fakes.InitContext{})
	if err != nil || g == nil {
		t.Fatalf("NewGlobalCommitter = %v, %v", g, err)
	}
	defer g.Close()
	raw := [][]byte{reqs[0].Data, reqs[1].Data}
	if err := g.CommitGlobal(context.Background(), 4, raw); err == nil {
		t.Fatal("global commit before the commits succeeded")
	}
	commit(t, s, reqs)
	for range 2 { // idempotent
		if err := g.CommitGlobal(context.Background(), 4, raw); err != nil {
			t.Fatal(err)
		}
	}
	want := map[int64][]string{4: {"job/sink/0/4", "job/sink/1/4"}}
	if got := store.GlobalCommits(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("global commits %v, want %v", got, want)
	}
}

func TestCollect(t *testing.T) {
	store := NewStore[int]()
	s := NewCollect(store)
	if c, err := sinkerase.Erase(s).NewCommitter(context.Background(), &fakes.InitContext{}); c != nil || err != nil {
		t.Fatalf("collect sink has a committer: %v, %v", c, err)
	}
	ic := &fakes.InitContext{Subtask: 2, Parallel: 3}
	w := newWriter(t, s, ic)
	write(t, w, 1, 2)
	if len(store.Committed()) != 0 {
		t.Fatal("visible before Flush")
	}
	if err := w.Flush(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	write(t, w, 3)
	if err := w.Flush(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	write(t, w, 4)
	w.Close() // never flushed: dropped
	got, err := store.Final()
	if err != nil || !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("Final = %v, %v", got, err)
	}
	if by := store.CommittedBySubtask(); !slices.Equal(by[2], []int{1, 2, 3}) {
		t.Fatalf("by subtask %v", by)
	}
	if store.CommitCount() != 0 {
		t.Fatal("collect flushes counted as commits")
	}
}

func TestConcurrentWritersAndCommitters(t *testing.T) {
	const writers, checkpoints, perCkpt = 4, 20, 50
	store := NewStore[int]()
	s := NewTwoPhase(store)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for sub := range writers {
		wg.Go(func() {
			e := sinkerase.Erase(s)
			ic := &fakes.InitContext{Subtask: sub, Parallel: writers}
			w, err := sinkerase.Open(context.Background(), e, ic, nil)
			if err != nil {
				errs <- err
				return
			}
			defer w.Close()
			c, _ := e.NewCommitter(context.Background(), ic)
			for ck := int64(1); ck <= checkpoints; ck++ {
				for i := range perCkpt {
					w.Write(context.Background(), sub*1_000_000+int(ck)*1000+i, sink.Meta{})
				}
				cs, err := w.PrepareCommit(context.Background(), ck)
				if err != nil {
					errs <- err
					return
				}
				reqs := []*sinkrt.Request{{CheckpointID: ck, Data: cs[0]}}
				c.Commit(context.Background(), reqs)
				if reqs[0].Outcome != sinkrt.Committed {
					errs <- fmt.Errorf("outcome %v: %v", reqs[0].Outcome, reqs[0].Err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, err := store.Final()
	if err != nil || len(got) != writers*checkpoints*perCkpt {
		t.Fatalf("%d records, %v", len(got), err)
	}
	for sub, recs := range store.CommittedBySubtask() {
		if !slices.IsSorted(recs) {
			t.Fatalf("subtask %d out of order", sub)
		}
	}
}
