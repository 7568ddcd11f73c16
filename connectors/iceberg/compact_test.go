package iceberg

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/sluice-io/sluice/sink"
)

// TestCompaction commits six checkpoints (two writers, eight partitions:
// two files per checkpoint and partition) with Compaction(3) while a
// reader scans the table again and again: every scan holds each record at
// most once and exactly the records of a committed prefix of checkpoints.
// After checkpoints 3 and 6 a replace snapshot merges the window's files
// (one file per partition). Checkpoint 3's committables delivered again
// afterwards (a restore after a crash that followed the commit) add
// nothing, although compaction removed their files from the table; the
// same with a crash injected between a compaction's commit and
// CommitGlobal's return.
func TestCompaction(t *testing.T) {
	cat, ident := sqliteBackend(t)
	part, err := ParsePartitionSpec("split")
	if err != nil {
		t.Fatal(err)
	}
	var hookMu sync.Mutex
	failAfterCompaction := false
	s, err := New(cat, ident, testRow, CreateTable(testColumns, part, nil), Compaction(3),
		withHook(func(_ context.Context, stage string, cp int64) error {
			hookMu.Lock()
			defer hookMu.Unlock()
			if stage == "after-compaction" && failAfterCompaction {
				failAfterCompaction = false
				return fmt.Errorf("injected crash after the compaction of checkpoint %d", cp)
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const perCP = 40 // records per checkpoint: 2 writers × 20, over 8 splits
	prepare := func(cp int64) []committable {
		var out []committable
		for sub := range 2 {
			w, err := s.CreateWriter(ctx, testInit{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range perCP / 2 {
				k := (cp-1)*perCP + int64(sub*perCP/2+i)
				if err := w.Write(ctx, failureRecord(k), sink.Meta{}); err != nil {
					t.Fatal(err)
				}
			}
			cs, err := w.PrepareCommit(ctx, cp)
			if err != nil {
				t.Fatal(err)
			}
			w.Close()
			out = append(out, cs...)
		}
		return out
	}
	// the reader
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readErrs []string
	scans := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 100_000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			st, err := readTable(context.Background(), cat, ident)
			if err != nil {
				readErrs = append(readErrs, err.Error())
				return
			}
			scans++
			seen := map[int64]bool{}
			for _, r := range st.records {
				if seen[r.Seq] {
					readErrs = append(readErrs, fmt.Sprintf("scan %d: record %d twice", scans, r.Seq))
				}
				seen[r.Seq] = true
			}
			n := int64(len(st.records))
			if n%perCP != 0 {
				readErrs = append(readErrs, fmt.Sprintf("scan %d: %d records, not a whole number of checkpoints", scans, n))
			}
			for k := range n {
				if !seen[k] {
					readErrs = append(readErrs, fmt.Sprintf("scan %d: %d records without record %d", scans, n, k))
					break
				}
			}
		}
	}()
	gc, err := s.CreateGlobalCommitter(ctx, testInit{})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	var c3 []committable
	for cp := int64(1); cp <= 6; cp++ {
		cs := prepare(cp)
		if cp == 3 {
			c3 = cs
		}
		if cp == 6 {
			hookMu.Lock()
			failAfterCompaction = true
			hookMu.Unlock()
			if err := gc.CommitGlobal(ctx, cp, cs); err == nil {
				t.Fatal("the injected crash after the compaction did not fail CommitGlobal")
			}
			// the restore delivers checkpoint 6 again
		}
		if err := gc.CommitGlobal(ctx, cp, cs); err != nil {
			t.Fatalf("CommitGlobal(%d): %v", cp, err)
		}
	}
	// checkpoint 3 delivered again, after its files were compacted
	if err := gc.CommitGlobal(ctx, 7, c3); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	for _, e := range readErrs {
		t.Error(e)
	}
	st, err := readTable(ctx, cat, ident)
	if err != nil {
		t.Fatal(err)
	}
	checkExactly(t, st.records, 6*perCP)
	var ops []string
	for _, sn := range st.snapshots {
		op := string(sn.Summary.Operation)
		if r, ok := sn.Summary.Properties[SummaryCompactedCheckpoints]; ok {
			op += " " + r
		}
		ops = append(ops, op)
	}
	want := "[append append append replace 1-3 append append append replace 4-6]"
	if fmt.Sprint(ops) != want {
		t.Errorf("snapshots %v, want %s", ops, want)
	}
	if len(st.files) != 16 {
		t.Errorf("%d live data files, want 16 (one per partition and compaction)", len(st.files))
	}
	t.Logf("%d scans during the commits and compactions; %d live files; snapshots %v", scans, len(st.files), ops)
}

// TestCompactionUnderFailures is TestExactlyOnceUnderFailures with
// compaction every 3 checkpoints.
func TestCompactionUnderFailures(t *testing.T) {
	testExactlyOnceUnderFailures(t, sqliteBackend, Compaction(3))
}

// TestCompactionBatchedCheckpoints hands the global committer the
// committables of five checkpoints in one CommitGlobal (what the runtime
// does when the committer fell behind) with Compaction(3): the five
// appends are followed by one replace snapshot of checkpoints 1-5 that
// leaves one file per partition, not one of the newest three only.
func TestCompactionBatchedCheckpoints(t *testing.T) {
	cat, ident := sqliteBackend(t)
	part, err := ParsePartitionSpec("split")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cat, ident, testRow, CreateTable(testColumns, part, nil), Compaction(3))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const perCP = 40 // records per checkpoint: 2 writers × 20, over 8 splits
	var all []committable
	for cp := int64(1); cp <= 5; cp++ {
		for sub := range 2 {
			w, err := s.CreateWriter(ctx, testInit{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range perCP / 2 {
				if err := w.Write(ctx, failureRecord((cp-1)*perCP+int64(sub*perCP/2+i)), sink.Meta{}); err != nil {
					t.Fatal(err)
				}
			}
			cs, err := w.PrepareCommit(ctx, cp)
			if err != nil {
				t.Fatal(err)
			}
			w.Close()
			all = append(all, cs...)
		}
	}
	gc, err := s.CreateGlobalCommitter(ctx, testInit{})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	if err := gc.CommitGlobal(ctx, 5, all); err != nil {
		t.Fatal(err)
	}
	st, err := readTable(ctx, cat, ident)
	if err != nil {
		t.Fatal(err)
	}
	checkExactly(t, st.records, 5*perCP)
	var ops []string
	for _, sn := range st.snapshots {
		op := string(sn.Summary.Operation)
		if r, ok := sn.Summary.Properties[SummaryCompactedCheckpoints]; ok {
			op += " " + r
		}
		ops = append(ops, op)
	}
	if want := "[append append append append append replace 1-5]"; fmt.Sprint(ops) != want {
		t.Errorf("snapshots %v, want %s", ops, want)
	}
	if len(st.files) != 8 {
		t.Errorf("%d live data files, want 8 (one per partition)", len(st.files))
	}
}
