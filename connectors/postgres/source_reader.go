package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/readerbase"
)

type elemKind uint8

const (
	eRow      elemKind = iota // a snapshot row
	eSegment                  // a snapshot page of the stream split ended
	eSnapDone                 // the stream split's snapshot ended
	eChange                   // a change from the log
	eTxnDone                  // a transaction's commit
	eAdvance                  // the server has sent everything before lsn
	eReady                    // the chunks' pages arrived: the stream split may start
)

// elem is what the fetcher hands to the emitter.
type elem struct {
	kind     elemKind
	ch       Change
	key      string   // eRow: the key, encoded
	keyParts []string // eChange: the key columns' text forms
	seen     bool     // eChange: the snapshot saw it (reconcile)
	seg      Segment
	segs     []Segment
	lsn      uint64
	n        int
}

// sourceReader is readerbase.Reader plus the confirmation of the stream's
// LSN once a checkpoint's output is committed (source.CommitListener).
type sourceReader[T any] struct {
	*readerbase.Reader[elem, T, Split, *Split]
	rctx    source.ReaderContext
	lsns    map[int64]uint64 // checkpoint → the LSN it lets the slot confirm
	confirm *atomic.Uint64   // read by the fetcher
	unacked map[string]Split // finished CDC chunks the enumerator has not acknowledged
	ready   *atomic.Pointer[map[string][]Segment]
}

// testHooks let tests watch the LSNs of checkpoints and confirmations.
var testHooks struct {
	sync.Mutex
	snapshot  func(checkpointID int64, lsn uint64)
	committed func(checkpointID int64, lsn uint64)
}

// CreateReader returns the reader of one subtask: one connection for
// chunk pages and, for the stream split, a replication connection.
func (s *pgSource[T]) CreateReader(rctx source.ReaderContext) (source.Reader[T, Split], error) {
	confirm := &atomic.Uint64{}
	ready := &atomic.Pointer[map[string][]Segment]{}
	r := &sourceReader[T]{rctx: rctx, lsns: map[int64]uint64{}, confirm: confirm, unacked: map[string]Split{}, ready: ready}
	emit := func(e elem, out source.Output[T], st *Split) error {
		switch e.kind {
		case eRow:
			k := e.key
			st.Lo = &k
			v, err := s.conv(e.ch)
			if err != nil {
				return fmt.Errorf("postgres source: table %s key %s: %w", e.ch.Table, e.key, err)
			}
			out.Collect(v)
		case eSegment:
			st.Segments = append(st.Segments, e.seg)
		case eSnapDone:
			st.Snapshotting, st.Lo = false, nil
		case eReady:
			st.Segments, st.Waiting = e.segs, false
		case eChange, eTxnDone, eAdvance:
			st.LSN, st.N, st.Done = e.lsn, e.n, e.kind == eTxnDone
			if len(st.Segments) > 0 && e.lsn > maxH(st.Segments) {
				st.Segments = nil // every later transaction is newer than every page
			}
			if e.kind != eChange {
				return nil
			}
			if e.seen {
				return nil
			}
			v, err := s.conv(e.ch)
			if err != nil {
				return fmt.Errorf("postgres source: table %s LSN %s: %w", e.ch.Table, lsnString(e.lsn), err)
			}
			out.CollectAt(v, e.ch.CommitTime.UnixMilli())
		}
		return nil
	}
	base, err := readerbase.New(rctx, readerbase.Config[elem, T, Split, *Split]{
		NewSplitReader: func() (readerbase.SplitReader[elem, Split], error) {
			return &splitReader[T]{s: s, confirm: confirm, ready: ready}, nil
		},
		OnSplitFinished: func(done []*Split) error {
			for _, st := range done {
				if st.CDC {
					sp := st.clone()
					sp.Finished = true
					r.unacked[sp.ID] = sp
					rctx.SendEventToEnumerator(chunkDone{ID: sp.ID, Segments: sp.Segments})
				}
			}
			return nil
		},
		Emitter:   readerbase.EmitterFunc[elem, T, *Split](emit),
		InitState: func(sp Split) *Split { c := sp.clone(); return &c },
		ToSplit:   func(st *Split) Split { return st.clone() },
	}, readerbase.PullSplits())
	if err != nil {
		return nil, err
	}
	r.Reader = base
	return r, nil
}

// SnapshotState remembers the LSN the checkpoint lets the slot confirm.
func (r *sourceReader[T]) SnapshotState(checkpointID int64) ([]Split, error) {
	ss, err := r.Reader.SnapshotState(checkpointID)
	if err != nil {
		return nil, err
	}
	for _, id := range slices.Sorted(maps.Keys(r.unacked)) {
		ss = append(ss, r.unacked[id].clone())
	}
	for _, sp := range ss {
		if sp.Stream && !sp.Snapshotting && !sp.Waiting {
			lsn := confirmable(sp)
			r.lsns[checkpointID] = lsn
			testHooks.Lock()
			if f := testHooks.snapshot; f != nil {
				f(checkpointID, lsn)
			}
			testHooks.Unlock()
		}
	}
	return ss, nil
}

// AddSplits keeps restored finished CDC chunks aside and reports them to
// the enumerator again; the others are read.
func (r *sourceReader[T]) AddSplits(splits []Split) error {
	var read []Split
	for _, sp := range splits {
		if sp.Finished {
			r.unacked[sp.ID] = sp.clone()
			r.rctx.SendEventToEnumerator(chunkDone{ID: sp.ID, Segments: sp.Segments})
			continue
		}
		read = append(read, sp)
	}
	if len(read) == 0 {
		return nil
	}
	return r.Reader.AddSplits(read)
}

// HandleSourceEvent takes the enumerator's acknowledgements and the
// finished chunks' pages.
func (r *sourceReader[T]) HandleSourceEvent(e source.Event) error {
	switch ev := e.(type) {
	case chunkAck:
		delete(r.unacked, ev.ID)
	case chunksEvent:
		m := ev.Chunks
		r.ready.Store(&m)
	}
	return nil
}

// confirmable is the LSN a slot may confirm once sp's checkpoint is
// committed: every transaction that commits before it was emitted in
// full. The server resends transactions whose commit LSN is at or after
// the confirmed one, so a transaction emitted in part is not confirmed.
func confirmable(sp Split) uint64 {
	if sp.Done || sp.LSN == 0 {
		return sp.LSN
	}
	return sp.LSN - 1
}

// NotifyCheckpointCommitted lets the fetcher confirm the LSN of the
// checkpoint (and of earlier ones whose notice was skipped) to the server
// with its next standby status update: only now may the slot release the
// WAL before it, since no restore will need it again.
func (r *sourceReader[T]) NotifyCheckpointCommitted(checkpointID int64) error {
	var best uint64
	for id, lsn := range r.lsns {
		if id <= checkpointID {
			best = max(best, lsn)
			delete(r.lsns, id)
		}
	}
	if best == 0 {
		return nil
	}
	testHooks.Lock()
	if f := testHooks.committed; f != nil {
		f(checkpointID, best)
	}
	testHooks.Unlock()
	for {
		cur := r.confirm.Load()
		if best <= cur || r.confirm.CompareAndSwap(cur, best) {
			return nil
		}
	}
}

// splitReader is the fetcher side.
type splitReader[T any] struct {
	s       *pgSource[T]
	confirm *atomic.Uint64
	ready   *atomic.Pointer[map[string][]Segment]
	conn    *pgx.Conn
	t       *srcTable
	splits  []*Split // fetch positions, in assignment order
	st      *streamConn
	failed  error // reported by the next Fetch
	wait    chunkWait
}

func (r *splitReader[T]) AddSplits(splits []Split) error {
	for _, sp := range splits {
		c := sp.clone()
		r.splits = append(r.splits, &c)
	}
	return nil
}

func (r *splitReader[T]) Fetch(ctx context.Context) (readerbase.Batch[elem], error) {
	if r.failed != nil {
		return readerbase.Batch[elem]{}, r.failed
	}
	if len(r.splits) == 0 {
		return readerbase.Batch[elem]{}, nil
	}
	if err := r.connectOnce(ctx); err != nil {
		return readerbase.Batch[elem]{}, sourceUnrecoverable(err)
	}
	for _, sp := range r.splits {
		if err := r.t.checkKey(sp); err != nil {
			return readerbase.Batch[elem]{}, sourceUnrecoverable(err)
		}
	}
	i := slices.IndexFunc(r.splits, func(sp *Split) bool { return !sp.Waiting })
	if i < 0 {
		return r.awaitChunks(ctx, r.splits[0])
	}
	sp := r.splits[i]
	switch {
	case sp.CDC:
		return r.fetchSnapshotPage(ctx, sp, i)
	case !sp.Stream:
		return r.fetchChunk(ctx, sp)
	case sp.Snapshotting:
		return r.fetchSnapshotPage(ctx, sp, i)
	}
	return r.fetchStream(ctx, sp)
}

// connectOnce opens the reader's connection and loads the table, the
// first time and again after the connection closed: readerbase wakes a
// Fetch by cancelling its ctx, and pgx closes a connection whose query is
// cancelled, so a woken Fetch leaves a closed connection behind.
func (r *splitReader[T]) connectOnce(ctx context.Context) error {
	if r.conn != nil && !r.conn.IsClosed() {
		return nil
	}
	if r.conn != nil {
		_ = r.conn.Close(context.Background())
		r.conn = nil
	}
	conn, err := r.s.connect(ctx)
	if err != nil {
		return err
	}
	t, err := loadSourceTable(ctx, conn, r.s.table, r.s.cfg.keys)
	if err != nil {
		_ = conn.Close(context.Background())
		return fmt.Errorf("postgres source: %w", err)
	}
	r.conn, r.t = conn, t
	for _, sp := range r.splits {
		if sp.Stream { // fail before the snapshot is read again
			if err := r.checkSlot(ctx, sp); err != nil {
				return err
			}
		}
	}
	return nil
}

// awaitChunks waits (up to 100ms a call) for the pages of every chunk of
// the waiting stream split (chunk-0 … chunk-<Chunks-1>), then hands them
// to it. A wait that lasts ChunkWaitWarning without another chunk
// arriving is logged (again after each further ChunkWaitWarning), naming
// the chunks still missing.
func (r *splitReader[T]) awaitChunks(ctx context.Context, sp *Split) (readerbase.Batch[elem], error) {
	var have map[string][]Segment
	if m := r.ready.Load(); m != nil {
		have = *m
	}
	missing := missingChunks(have, sp.Chunks)
	if len(missing) == 0 {
		var segs []Segment
		for _, id := range slices.Sorted(maps.Keys(have)) {
			segs = append(segs, have[id]...)
		}
		sp.Waiting, sp.Segments = false, segs
		r.wait = chunkWait{}
		return readerbase.Batch[elem]{Records: []readerbase.SplitRecords[elem]{{SplitID: sp.ID, Records: []elem{{kind: eReady, segs: segs}}}}}, nil
	}
	r.watchWait(missing, sp.Chunks)
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return readerbase.Batch[elem]{}, nil
}

// chunkWait is the stream split's wait for its chunks: since when the
// number missing is what it is, and when the wait was last logged.
type chunkWait struct {
	missing int
	since   time.Time
	warned  time.Time
}

// watchWait logs a wait for chunks that made no progress for
// ChunkWaitWarning: a chunk is missing until it was read to its end and
// its pages are in a completed checkpoint, so a long wait means stalled
// readers or checkpoints that do not complete, or a chunk split lost.
func (r *splitReader[T]) watchWait(missing []string, total int) {
	now := time.Now()
	if r.wait.since.IsZero() || r.wait.missing != len(missing) {
		r.wait = chunkWait{missing: len(missing), since: now, warned: now}
		return
	}
	d := r.s.cfg.chunkWaitWarn
	if now.Sub(r.wait.warned) < d {
		return
	}
	r.wait.warned = now
	shown := missing
	if len(shown) > 20 {
		shown = shown[:20]
	}
	r.s.cfg.logger.Warn("postgres CDC source: the stream split is still waiting for the snapshot's chunks; a chunk arrives once read to its end and in a completed checkpoint: are checkpoints completing, are the readers of these chunks progressing?",
		"table", r.t.name, "waited", now.Sub(r.wait.since).Round(time.Second), "missing", len(missing), "of", total, "chunks", strings.Join(shown, ","))
}

// missingChunks returns the ids of the chunks chunk-0 … chunk-<n-1> that
// have no pages in have, in order.
func missingChunks(have map[string][]Segment, n int) []string {
	var out []string
	for i := range n {
		id := "chunk-" + strconv.Itoa(i)
		if _, ok := have[id]; !ok {
			out = append(out, id)
		}
	}
	return out
}

// fetchChunk reads one page of a chunk.
func (r *splitReader[T]) fetchChunk(ctx context.Context, sp *Split) (readerbase.Batch[elem], error) {
	rows, keys, err := r.t.readPage(ctx, r.conn, sp.Lo, sp.Hi, r.s.cfg.fetchSize)
	if err != nil {
		return readerbase.Batch[elem]{}, fmt.Errorf("postgres source: split %s after key %s: %w", sp.ID, strOr(sp.Lo, "(start)"), err)
	}
	els := make([]elem, len(rows))
	for i, row := range rows {
		els[i] = elem{kind: eRow, key: keys[i], ch: Change{Op: OpRead, Table: r.t.name, Key: r.t.keyValue(row), After: row}}
	}
	b := readerbase.Batch[elem]{Records: []readerbase.SplitRecords[elem]{{SplitID: sp.ID, Records: els}}}
	if len(keys) > 0 {
		sp.Lo = &keys[len(keys)-1]
	}
	if len(rows) < r.s.cfg.fetchSize {
		b.Finished = []string{sp.ID}
		r.splits = slices.DeleteFunc(r.splits, func(x *Split) bool { return x == sp })
	}
	return b, nil
}

// fetchSnapshotPage reads one page of the stream split's snapshot in a
// REPEATABLE READ transaction and records the page's key range with the
// transaction's snapshot and the WAL position after it, for the stream to
// reconcile with.
func (r *splitReader[T]) fetchSnapshotPage(ctx context.Context, sp *Split, at int) (readerbase.Batch[elem], error) {
	fail := func(err error) (readerbase.Batch[elem], error) {
		return readerbase.Batch[elem]{}, fmt.Errorf("postgres source: snapshot of table %s after key %s: %w", r.t.name, strOr(sp.Lo, "(start)"), err)
	}
	tx, err := r.conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fail(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	var snap string
	if err := tx.QueryRow(ctx, "SELECT pg_current_snapshot()::text").Scan(&snap); err != nil {
		return fail(err)
	}
	seg, err := parseSnapshot(snap)
	if err != nil {
		return fail(err)
	}
	rows, keys, err := r.t.readPage(ctx, tx, sp.Lo, sp.Hi, r.s.cfg.fetchSize)
	if err != nil {
		return fail(err)
	}
	var h string
	if err := tx.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&h); err != nil {
		return fail(err)
	}
	if seg.H, err = parseLSN(h); err != nil {
		return fail(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(err)
	}
	els := make([]elem, 0, len(rows)+2)
	for i, row := range rows {
		els = append(els, elem{kind: eRow, key: keys[i], ch: Change{Op: OpRead, Table: r.t.name, Key: r.t.keyValue(row), After: row}})
	}
	seg.Lo = clonePtr(sp.Lo)
	short := len(rows) < r.s.cfg.fetchSize
	seg.Hi = clonePtr(sp.Hi) // the last page ends where the chunk does
	if !short {
		seg.Hi = &keys[len(keys)-1]
	}
	els = append(els, elem{kind: eSegment, seg: seg})
	if sp.Stream {
		sp.Segments = append(sp.Segments, seg)
	}
	if len(keys) > 0 {
		sp.Lo = &keys[len(keys)-1]
	}
	b := readerbase.Batch[elem]{}
	if short && sp.CDC {
		b.Finished = []string{sp.ID}
		r.splits = slices.Delete(r.splits, at, at+1)
	} else if short {
		els = append(els, elem{kind: eSnapDone})
		sp.Snapshotting, sp.Lo = false, nil
	}
	b.Records = []readerbase.SplitRecords[elem]{{SplitID: sp.ID, Records: els}}
	return b, nil
}

func (r *splitReader[T]) Close() error {
	var err error
	if r.st != nil && r.st.repl != nil {
		pid := r.st.repl.PID()
		err = r.st.close()
		if r.conn != nil {
			r.awaitRelease(pid)
		}
	}
	if r.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if cerr := r.conn.Close(ctx); err == nil {
			err = cerr
		}
	}
	return err
}

// awaitRelease waits (up to 5s) until the walsender of the closed
// replication connection pid let go of the slot, so that the slot can be
// dropped or used again as soon as the reader is closed.
func (r *splitReader[T]) awaitRelease(pid uint32) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := 0; i < 100 && ctx.Err() == nil; i++ {
		var active *int64
		err := r.conn.QueryRow(ctx, "SELECT active_pid::int8 FROM pg_replication_slots WHERE slot_name = $1", r.s.cfg.slot).Scan(&active)
		if err != nil || active == nil || *active != int64(pid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func strOr(p *string, def string) string {
	if p == nil {
		return def
	}
	return strconv.Quote(*p)
}

// closeConn closes a replication connection, bounded.
func closeConn(c *pgconn.PgConn) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Close(ctx)
}
