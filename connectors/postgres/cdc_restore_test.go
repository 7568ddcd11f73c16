package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// TestCDCRestoreKeepsChunks: a CDC job restored from a checkpoint keeps
// the chunks of its first computation. The table has 199 rows (2 chunks
// of 100) when the first job snapshots it, and 449 (5 chunks) when a new
// job restores the first one's last checkpoint: the restored enumerator
// must not hand out the chunks a new computation finds (chunk-2 … chunk-4
// would read again rows the first job's last chunk, open-ended, read, and
// rows the stream emits as inserts). The output is every change once.
func TestCDCRestoreKeepsChunks(t *testing.T) {
	url := needServer(t)
	const prefill, chunk = 199, 100
	table := newTable(t, "cdcrechunk", "id bigint PRIMARY KEY, v bigint NOT NULL")
	mustExec(t, "ALTER TABLE "+table+" REPLICA IDENTITY FULL",
		fmt.Sprintf("INSERT INTO %s SELECT g, 0 FROM generate_series(1, %d) g", table, prefill))
	slot, pub := "s_"+table, "p_"+table
	dropSlot(t, url, slot, pub)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	src, err := NewCDCSource(url, table, Slot(slot), Publication(pub), CreateSlot(true), CreatePublication(true),
		ChunkSize(chunk), FetchSize(40))
	if err != nil {
		t.Fatal(err)
	}
	store := testsink.NewStore[Change]()
	dir := t.TempDir()
	newEnv := func(opts ...stream.Option) *stream.Environment {
		env := stream.New(append([]stream.Option{stream.Parallelism(2), stream.CheckpointEvery(30 * time.Millisecond),
			stream.CheckpointDir(dir), stream.RetainCheckpoints(10_000), stream.Logger(stream.DiscardLogger())}, opts...)...)
		stream.SinkTo(stream.FromSource(env, src, watermark.None[Change](), "cdc"), testsink.NewTwoPhase(store), "out")
		return env
	}
	w := newWorkload(table, prefill)
	// run runs a job and a workload of n more changes until the output has
	// caught up with the table and ten more checkpoints completed (a chunk
	// read twice would show by then), and returns the last checkpoint.
	run := func(env *stream.Environment, n int, seed uint64) *checkpoint.Snapshot {
		h, err := env.Start(ctx, "cdc")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { h.Cancel(); _, _ = h.Wait() }()
		if err := w.run(ctx, url, w.changes+n, seed); err != nil {
			t.Fatal(err)
		}
		final, err := tableState(ctx, url, table)
		if err != nil {
			t.Fatal(err)
		}
		var after int64 = -1
		caughtUp := onCommit(store, func() bool { return mapsEqual(apply(store.Committed()), final) })
		for i := 0; i < 6000 && ctx.Err() == nil; i++ {
			if after < 0 && caughtUp() {
				after = 0
				if l := h.Latest(); l != nil {
					after = l.ID
				}
			}
			if l := h.Latest(); after >= 0 && l != nil && l.ID >= after+10 {
				return l
			}
			select {
			case <-h.Done():
				_, err := h.Wait()
				t.Fatalf("the job ended: %v", err)
			case <-time.After(10 * time.Millisecond):
			}
		}
		t.Fatal("the output did not catch up with the table")
		return nil
	}
	last := run(newEnv(), 100, 1)
	// The table grows while no job runs: 250 rows more, 5 chunks' worth.
	first := w.nextID
	mustExec(t, fmt.Sprintf("INSERT INTO %s SELECT g, 0 FROM generate_series(%d, %d) g", table, first, first+249))
	for id := first; id < first+250; id++ {
		w.log[id] = []wop{{OpInsert, 0}}
		w.live = append(w.live, id)
		w.ver[id] = 0
	}
	w.nextID = first + 250
	run(newEnv(stream.RestoreFrom(last)), 100, 2)
	w.checkExactlyOnce(t, store.Committed())
}

// TestChunkWaitWarning: a stream split that waits for its chunks longer
// than ChunkWaitWarning without one arriving logs a warning naming the
// missing chunks; once every chunk-<i> has its pages, it starts with all
// of them. (No server: the wait does not touch the connection.)
func TestChunkWaitWarning(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	src, err := NewCDCSource("postgres://u@127.0.0.1:1/db", "t", ChunkWaitWarning(50*time.Millisecond), SourceLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	ready := &atomic.Pointer[map[string][]Segment]{}
	// chunk-9 is not one of the split's chunks: it does not count.
	m := map[string][]Segment{"chunk-0": {{H: 1}}, "chunk-2": {{H: 3}}, "chunk-9": {{H: 9}}}
	ready.Store(&m)
	r := &splitReader[Change]{s: src.(*pgSource[Change]), ready: ready, t: &srcTable{name: "public.t"}}
	sp := &Split{ID: "stream", Stream: true, Waiting: true, Chunks: 4}
	for i := 0; i < 50 && !strings.Contains(buf.String(), "level=WARN"); i++ {
		b, err := r.awaitChunks(t.Context(), sp)
		if err != nil || len(b.Records) > 0 || !sp.Waiting {
			t.Fatalf("with 2 of 4 chunks: batch %v, error %v, waiting %v", b, err, sp.Waiting)
		}
	}
	if out := buf.String(); !strings.Contains(out, "missing=2 of=4 chunks=chunk-1,chunk-3") || !strings.Contains(out, "table=public.t") {
		t.Fatalf("log: %q; want a warning naming chunk-1 and chunk-3", out)
	}
	all := map[string][]Segment{"chunk-0": {{H: 1}}, "chunk-1": {{H: 2}}, "chunk-2": {{H: 3}}, "chunk-3": {{H: 4}}}
	ready.Store(&all)
	b, err := r.awaitChunks(t.Context(), sp)
	if err != nil || sp.Waiting || len(sp.Segments) != 4 || len(b.Records) != 1 || b.Records[0].Records[0].kind != eReady {
		t.Fatalf("with every chunk: batch %v, error %v, waiting %v, segments %v", b, err, sp.Waiting, sp.Segments)
	}
}

// TestKeyChangedOnRestore: splits carry the key columns their positions
// are of; a reader restored with another key fails at once (unrecoverable)
// with an error naming both keys, instead of reading a position of one
// key as a value of the other (one-column positions look alike).
func TestKeyChangedOnRestore(t *testing.T) {
	url := needServer(t)
	table := newTable(t, "rekey", "id bigint PRIMARY KEY, code bigint NOT NULL UNIQUE")
	mustExec(t, "INSERT INTO "+table+" SELECT g, 1000 - g FROM generate_series(1, 100) g")
	byID, err := NewSnapshotSource(url, table, ChunkSize(40))
	if err != nil {
		t.Fatal(err)
	}
	splits, err := byID.(*pgSource[Change]).setup(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range splits {
		if !slices.Equal(sp.Key, []string{"id"}) {
			t.Fatalf("split %s: Key %v, want [id]", sp.ID, sp.Key)
		}
	}
	byCode, err := NewSnapshotSource(url, table, KeyColumn("code"))
	if err != nil {
		t.Fatal(err)
	}
	r := &splitReader[Change]{s: byCode.(*pgSource[Change]), confirm: &atomic.Uint64{}, ready: &atomic.Pointer[map[string][]Segment]{}}
	defer func() { _ = r.Close() }()
	if err := r.AddSplits(splits[1:2]); err != nil {
		t.Fatal(err)
	}
	_, err = r.Fetch(t.Context())
	if !errors.Is(err, restart.ErrUnrecoverable) {
		t.Fatalf("Fetch with another key: %v; want an unrecoverable error", err)
	}
	wantErr(t, err, "split chunk-1", table, "positions of key (id)", "key is now (code)")

	// Splits of checkpoints before the key was recorded are not checked.
	old := splits[1]
	old.Key = nil
	r2 := &splitReader[Change]{s: byID.(*pgSource[Change]), confirm: &atomic.Uint64{}, ready: &atomic.Pointer[map[string][]Segment]{}}
	defer func() { _ = r2.Close() }()
	if err := r2.AddSplits([]Split{old}); err != nil {
		t.Fatal(err)
	}
	if b, err := r2.Fetch(t.Context()); err != nil || len(b.Records) != 1 || len(b.Records[0].Records) != 40 {
		t.Fatalf("Fetch of a split without Key: %v, %v; want the chunk's 40 rows", b.Records, err)
	}
}

// TestCDCRestoreFromEachSnapshotCheckpoint restores, in new jobs, the
// checkpoints a CDC job took during its parallel snapshot, while a
// workload wrote the table: each is a point where a kill -9 can land
// (chunks pending, being read, finished but not acknowledged, the stream
// split waiting), and some restores change the parallelism. Each restore
// runs on a copy of the slot as it was (the first job never streamed), so
// each is an alternative future: the first job's output up to the
// checkpoint plus the restored job's must be every change once.
func TestCDCRestoreFromEachSnapshotCheckpoint(t *testing.T) {
	url := needServer(t)
	const prefill = 1500
	table := newTable(t, "cdcsnapck", "id bigint PRIMARY KEY, v bigint NOT NULL")
	mustExec(t, "ALTER TABLE "+table+" REPLICA IDENTITY FULL",
		fmt.Sprintf("INSERT INTO %s SELECT g, 0 FROM generate_series(1, %d) g", table, prefill))
	slot, pub := "s_"+table, "p_"+table
	dropSlot(t, url, slot, pub)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	opts := []SourceOption{Publication(pub), CreatePublication(true), ChunkSize(100), FetchSize(25)}
	store := testsink.NewStore[Change]()
	newEnv := func(src source.Source[Change, Split, EnumState], p int, slow time.Duration, o ...stream.Option) *stream.Environment {
		env := stream.New(append([]stream.Option{stream.Parallelism(p), stream.CheckpointEvery(30 * time.Millisecond),
			stream.Logger(stream.DiscardLogger())}, o...)...)
		s := stream.FromSource(env, src, watermark.None[Change](), "cdc")
		s = stream.Map(s, func(c Change) Change { time.Sleep(slow); return c })
		stream.SinkTo(s, testsink.NewTwoPhase(store), "out")
		return env
	}
	src, err := NewCDCSource(url, table, append(opts, Slot(slot), CreateSlot(true))...)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorkload(table, prefill)
	h, err := newEnv(src, 2, time.Millisecond).Start(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	werr := make(chan error, 1)
	go func() { werr <- w.run(ctx, url, 1500, 1) }()
	// Keep every checkpoint until half the snapshot is committed.
	var snaps []*checkpoint.Snapshot
	for i := 0; i < 20000 && len(store.Committed()) < prefill/2; i++ {
		if l := h.Latest(); l != nil && (len(snaps) == 0 || snaps[len(snaps)-1].ID != l.ID) {
			snaps = append(snaps, l)
		}
		time.Sleep(2 * time.Millisecond)
	}
	h.Cancel()
	_, _ = h.Wait()
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	final, err := tableState(ctx, url, table)
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) < 3 {
		t.Fatalf("%d checkpoints during the snapshot; want at least 3", len(snaps))
	}
	// Up to 6 checkpoints, spread evenly, the first and the last among them.
	var picks []*checkpoint.Snapshot
	for i := range 6 {
		s := snaps[i*(len(snaps)-1)/5]
		if len(picks) == 0 || picks[len(picks)-1] != s {
			picks = append(picks, s)
		}
	}
	for i, snap := range picks {
		name := fmt.Sprintf("r%d", i)
		cp := fmt.Sprintf("%s_%s", slot, name)
		dropSlot(t, url, cp, pub)
		mustExec(t, fmt.Sprintf("SELECT pg_copy_logical_replication_slot('%s', '%s')", slot, cp))
		rsrc, err := NewCDCSource(url, table, append(opts, Slot(cp))...)
		if err != nil {
			t.Fatal(err)
		}
		p := []int{2, 1, 3}[i%3]
		rh, err := newEnv(rsrc, p, 0, stream.RestoreFrom(snap)).Start(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		out := func() []Change {
			var cs []Change
			for _, txn := range store.CommittedTxns() {
				if txn.Job == name || txn.Job == "first" && txn.CheckpointID <= snap.ID {
					cs = append(cs, txn.Records...)
				}
			}
			return cs
		}
		var after int64 = -1
		caughtUp := onCommit(store, func() bool { return mapsEqual(apply(out()), final) })
		for j := 0; j < 6000 && ctx.Err() == nil; j++ {
			if after < 0 && caughtUp() {
				after = 0
				if l := rh.Latest(); l != nil {
					after = l.ID
				}
			}
			if l := rh.Latest(); after >= 0 && l != nil && l.ID >= after+10 {
				break
			}
			select {
			case <-rh.Done():
				_, err := rh.Wait()
				t.Fatalf("restore %d of checkpoint %d: the job ended: %v", i, snap.ID, err)
			case <-time.After(10 * time.Millisecond):
			}
		}
		rh.Cancel()
		_, _ = rh.Wait()
		if after < 0 {
			t.Fatalf("restore %d of checkpoint %d (parallelism %d): the output did not catch up with the table", i, snap.ID, p)
		}
		t.Run(fmt.Sprintf("checkpoint-%d-parallelism-%d", snap.ID, p), func(t *testing.T) { w.checkExactlyOnce(t, out()) })
	}
}
