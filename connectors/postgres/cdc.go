package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluice-io/sluice/source/readerbase"
)

// Segment is a page the CDC source's snapshot read: keys in (Lo, Hi]
// (nil: unbounded), read in a transaction whose snapshot was
// Xmin:Xmax:Xip, and H, the WAL insert position right after the read. A
// change on a key of the page whose transaction the snapshot saw is in
// the page already and is not emitted again; one it did not see is.
type Segment struct {
	Lo   *string  `json:"lo,omitempty"`
	Hi   *string  `json:"hi,omitempty"`
	Xmin uint64   `json:"xmin"`
	Xmax uint64   `json:"xmax"`
	Xip  []uint64 `json:"xip,omitempty"`
	H    uint64   `json:"h"`
}

// parseSnapshot parses pg_snapshot's text form "xmin:xmax:xip,xip,…".
func parseSnapshot(s string) (Segment, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return Segment{}, fmt.Errorf("unexpected pg_current_snapshot() %q", s)
	}
	var seg Segment
	var err error
	if seg.Xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return Segment{}, fmt.Errorf("pg_current_snapshot() %q: %w", s, err)
	}
	if seg.Xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return Segment{}, fmt.Errorf("pg_current_snapshot() %q: %w", s, err)
	}
	if parts[2] != "" {
		for _, x := range strings.Split(parts[2], ",") {
			v, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return Segment{}, fmt.Errorf("pg_current_snapshot() %q: %w", s, err)
			}
			seg.Xip = append(seg.Xip, v)
		}
	}
	return seg, nil
}

func parseLSN(s string) (uint64, error) {
	l, err := pglogrepl.ParseLSN(s)
	return uint64(l), err
}

func lsnString(l uint64) string { return pglogrepl.LSN(l).String() }

func maxH(segs []Segment) uint64 {
	var h uint64
	for _, s := range segs {
		h = max(h, s.H)
	}
	return h
}

// widen turns a 32-bit xid into the full xid nearest to ref.
func widen(xid uint32, ref uint64) uint64 {
	full := ref&^0xffffffff | uint64(xid)
	switch {
	case full > ref+1<<31 && full >= 1<<32:
		full -= 1 << 32
	case full+1<<31 < ref:
		full += 1 << 32
	}
	return full
}

// visible reports whether the committed transaction xid was visible to
// the segment's snapshot.
func (s Segment) visible(xid uint32) bool {
	full := widen(xid, s.Xmax)
	if full < s.Xmin {
		return true
	}
	if full >= s.Xmax {
		return false
	}
	return !slices.Contains(s.Xip, full)
}

// setupCDC checks the server, makes sure of the publication and the slot,
// and returns the stream split, starting at the slot's position, after
// the chunks of the snapshot. restored: a restored job's check, which
// creates nothing and returns no split (they are in the restored state).
func (s *pgSource[T]) setupCDC(ctx context.Context, conn *pgx.Conn, t *srcTable, restored bool) ([]Split, error) {
	var level string
	if err := conn.QueryRow(ctx, "SELECT current_setting('wal_level')").Scan(&level); err != nil {
		return nil, fmt.Errorf("postgres source: read wal_level: %w", err)
	}
	if level != "logical" {
		return nil, fmt.Errorf("%w: postgres CDC source: the server's wal_level is %q; logical replication needs wal_level = logical in postgresql.conf (and a server restart)", ErrWALLevel, level)
	}
	if t.ident2 != "f" {
		s.cfg.logger.Warn("postgres CDC source: the table's REPLICA IDENTITY is not FULL: deletes carry only the key columns and updates no before image", "table", t.name)
	}
	pub := s.cfg.publication
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)", pub).Scan(&exists); err != nil {
		return nil, fmt.Errorf("postgres CDC source: look up publication %q: %w", pub, err)
	}
	if !exists {
		if restored {
			return nil, fmt.Errorf("%w: postgres CDC source: publication %q does not exist (dropped since the checkpoint the job is restored from?): CREATE PUBLICATION %s FOR TABLE %s", ErrPublicationNotFound, pub, pub, t.ident.Sanitize())
		}
		if !s.cfg.createPub {
			return nil, fmt.Errorf("%w: postgres CDC source: publication %q does not exist: CREATE PUBLICATION %s FOR TABLE %s, or let the source create it (CreatePublication(true))", ErrPublicationNotFound, pub, pub, t.ident.Sanitize())
		}
		if _, err := conn.Exec(ctx, "CREATE PUBLICATION "+pgx.Identifier{pub}.Sanitize()+" FOR TABLE "+t.ident.Sanitize()); err != nil {
			var pg *pgconn.PgError
			if !errors.As(err, &pg) || pg.Code != "42710" { // duplicate_object: created meanwhile
				return nil, fmt.Errorf("postgres CDC source: create publication %q: %w", pub, err)
			}
		}
		s.cfg.logger.Info("postgres CDC source: created publication", "publication", pub, "table", t.name)
	}
	var published bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3)",
		pub, t.ident[0], t.ident[1]).Scan(&published); err != nil {
		return nil, fmt.Errorf("postgres CDC source: read the tables of publication %q: %w", pub, err)
	}
	if !published {
		return nil, fmt.Errorf("%w: postgres CDC source: publication %q does not publish table %s: ALTER PUBLICATION %s ADD TABLE %s", ErrPublicationNotFound, pub, t.name, pub, t.ident.Sanitize())
	}
	lsn, found, err := slotPosition(ctx, conn, s.cfg.slot)
	if err != nil {
		return nil, err
	}
	if restored {
		if !found {
			return nil, fmt.Errorf("%w: postgres CDC source: replication slot %q does not exist (dropped since the checkpoint the job is restored from?): the changes since the checkpoint are lost to this source; start afresh", ErrSlotNotFound, s.cfg.slot)
		}
		s.cfg.logger.Info("postgres CDC source: restored; the snapshot chunks are those of the checkpoint", "table", t.name, "slot", s.cfg.slot, "confirmed_lsn", lsnString(lsn))
		return nil, nil
	}
	if !found {
		if !s.cfg.createSlot {
			return nil, fmt.Errorf("%w: postgres CDC source: replication slot %q does not exist in this database: SELECT pg_create_logical_replication_slot('%s', 'pgoutput'), or let the source create it (CreateSlot(true))", ErrSlotNotFound, s.cfg.slot, s.cfg.slot)
		}
		var cp string
		err := conn.QueryRow(ctx, "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')", s.cfg.slot).Scan(&cp)
		if err != nil {
			return nil, fmt.Errorf("postgres CDC source: create replication slot %q: %w", s.cfg.slot, err)
		}
		if lsn, err = parseLSN(cp); err != nil {
			return nil, fmt.Errorf("postgres CDC source: create replication slot %q: %w", s.cfg.slot, err)
		}
		s.cfg.logger.Info("postgres CDC source: created replication slot", "slot", s.cfg.slot, "lsn", cp)
	}
	stream := Split{ID: "stream", Stream: true, LSN: lsn, Key: t.keyColumns()}
	switch {
	case s.cfg.skipSnapshot:
	case s.cfg.inStream:
		stream.Snapshotting = true
	default:
		// Chunks computed after the slot exists: every page's snapshot is
		// newer than the slot's start.
		chunks, err := s.chunks(ctx, conn, t)
		if err != nil {
			return nil, err
		}
		for i := range chunks {
			chunks[i].CDC = true
		}
		stream.Waiting, stream.Chunks = true, len(chunks)
		return append(chunks, stream), nil
	}
	return []Split{stream}, nil
}

// slotPosition returns the slot's confirmed_flush_lsn.
func slotPosition(ctx context.Context, conn *pgx.Conn, slot string) (lsn uint64, found bool, err error) {
	var confirmed *string
	var plugin *string
	err = conn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text, plugin FROM pg_replication_slots
		WHERE slot_name = $1 AND database = current_database()`, slot).Scan(&confirmed, &plugin)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("postgres CDC source: look up replication slot %q: %w", slot, err)
	}
	if plugin == nil || *plugin != "pgoutput" || confirmed == nil {
		return 0, false, fmt.Errorf("%w: postgres CDC source: replication slot %q is not a logical slot of plugin pgoutput (plugin %v)", ErrInvalidConfig, slot, strOr(plugin, "none"))
	}
	lsn, err = parseLSN(*confirmed)
	return lsn, true, err
}

// streamConn is the replication connection of the stream split.
type streamConn struct {
	repl       *pgconn.PgConn
	rels       map[uint32]*pglogrepl.RelationMessage
	ours       map[uint32]bool
	txn        txnState
	sent       uint64 // the LSN last confirmed
	lastStatus time.Time
}

type txnState struct {
	open    bool // between BEGIN and COMMIT
	lsn     uint64
	xid     uint32
	at      time.Time
	n       int
	skipAll bool
	skipN   int
}

func (c *streamConn) close() error {
	if c.repl == nil {
		return nil
	}
	err := closeConn(c.repl)
	c.repl = nil
	return err
}

// startStream opens the replication connection and starts replication
// from the split's position, after checking that the slot has not
// confirmed past it.
func (r *splitReader[T]) startStream(ctx context.Context, sp *Split) error {
	cfg := r.s.cfg
	if err := r.checkSlot(ctx, sp); err != nil {
		return err
	}
	pc, err := pgconn.ParseConfig(r.s.url)
	if err != nil {
		return fmt.Errorf("%w: connection URL: %w", ErrInvalidConfig, err)
	}
	if cfg.password != nil {
		pc.Password = *cfg.password
	}
	pc.RuntimeParams["replication"] = "database"
	pc.RuntimeParams["application_name"] = "sluice-cdc-" + cfg.slot
	// A previous attempt's walsender may still hold the slot for a moment.
	for attempt := 0; ; attempt++ {
		repl, err := pgconn.ConnectConfig(ctx, pc)
		if err != nil {
			return fmt.Errorf("postgres CDC source: replication connection to %s:%d: %w", pc.Host, pc.Port, err)
		}
		err = pglogrepl.StartReplication(ctx, repl, cfg.slot, pglogrepl.LSN(sp.LSN), pglogrepl.StartReplicationOptions{
			PluginArgs: []string{"proto_version '1'", "publication_names '" + cfg.publication + "'"}})
		if err == nil {
			cfg.logger.Debug("postgres CDC source: streaming", "slot", cfg.slot, "from", lsnString(sp.LSN), "skip", sp.N, "done", sp.Done,
				"pages", len(sp.Segments), "pages_h", lsnString(maxH(sp.Segments)))
			r.st = &streamConn{repl: repl, rels: map[uint32]*pglogrepl.RelationMessage{}, ours: map[uint32]bool{}, lastStatus: time.Now()}
			return nil
		}
		_ = closeConn(repl)
		var pg *pgconn.PgError
		if !errors.As(err, &pg) || pg.Code != "55006" || attempt >= 100 || ctx.Err() != nil { // object_in_use
			return fmt.Errorf("postgres CDC source: start replication on slot %q at %s: %w", cfg.slot, lsnString(sp.LSN), err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres CDC source: start replication on slot %q: %w", cfg.slot, context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkSlot fails unless the slot exists and still holds the changes
// from the split's position on.
func (r *splitReader[T]) checkSlot(ctx context.Context, sp *Split) error {
	cfg := r.s.cfg
	lsn, found, err := slotPosition(ctx, r.conn, cfg.slot)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: postgres CDC source: replication slot %q does not exist (dropped while the job was restored?): the changes since the checkpoint's LSN %s are lost to this source; start afresh", ErrSlotNotFound, cfg.slot, lsnString(sp.LSN))
	}
	// The server sends the transactions that commit at or after the
	// confirmed LSN: the one at sp.LSN must be among them.
	if lsn > sp.LSN {
		return fmt.Errorf("%w: postgres CDC source: slot %q confirmed LSN %s, past the restored position %s: the changes in between are no longer in the slot (restored from an older checkpoint or savepoint than the last committed one?)", ErrSlotAhead, cfg.slot, lsnString(lsn), lsnString(sp.LSN))
	}
	return nil
}

// sendStatus confirms the LSN of the last committed checkpoint.
func (r *splitReader[T]) sendStatus(ctx context.Context, force bool) error {
	c := r.confirm.Load()
	st := r.st
	if !force && c == st.sent && time.Since(st.lastStatus) < r.s.cfg.statusEvery {
		return nil
	}
	l := pglogrepl.LSN(c)
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, st.repl, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: l, WALFlushPosition: l, WALApplyPosition: l}); err != nil {
		return fmt.Errorf("postgres CDC source: send standby status: %w", err)
	}
	if c != st.sent {
		r.s.cfg.logger.Debug("postgres CDC source: confirmed", "slot", r.s.cfg.slot, "lsn", lsnString(c))
	}
	st.sent, st.lastStatus = c, time.Now()
	return nil
}

// fetchStream reads changes: it waits up to a second for the first
// message, then takes what arrives without a pause, up to FetchSize
// elements.
func (r *splitReader[T]) fetchStream(ctx context.Context, sp *Split) (readerbase.Batch[elem], error) {
	if r.st == nil || r.st.repl == nil {
		if err := r.startStream(ctx, sp); err != nil {
			return readerbase.Batch[elem]{}, sourceUnrecoverable(err)
		}
	}
	if err := r.sendStatus(ctx, false); err != nil {
		return readerbase.Batch[elem]{}, err
	}
	var els []elem
	// batch reconciles the changes with the snapshot's pages; on an error
	// it keeps the error for the next Fetch (a woken Fetch's error is
	// dropped) and drops the changes: the reader fails and restores.
	batch := func() readerbase.Batch[elem] {
		if err := r.reconcile(sp, els); err != nil {
			r.failed = err
			_ = r.st.close()
			return readerbase.Batch[elem]{}
		}
		return readerbase.Batch[elem]{Records: []readerbase.SplitRecords[elem]{{SplitID: sp.ID, Records: els}}}
	}
	// The wait is bounded by the connection's read deadline, not by a
	// context per message (pgconn watches a message's context with a
	// callback registered and removed per call): ctx's cancellation
	// (readerbase's wake-up, the reader's close) moves the deadline to
	// now, and the timeout is told apart by ctx.Err().
	nc := r.st.repl.Conn()
	deadline := time.Now().Add(time.Second)
	if err := nc.SetReadDeadline(deadline); err != nil {
		return readerbase.Batch[elem]{}, fmt.Errorf("postgres CDC source: set read deadline: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetReadDeadline(time.Now()) })
	defer func() {
		if stop() { // the callback did not run, and will not
			_ = nc.SetReadDeadline(time.Time{})
		}
	}()
	for len(els) < r.s.cfg.fetchSize {
		msg, err := r.st.repl.ReceiveMessage(context.Background())
		if err != nil {
			if ctx.Err() != nil {
				return batch(), ctx.Err()
			}
			if pgconn.Timeout(err) {
				break
			}
			_ = r.st.close()
			return readerbase.Batch[elem]{}, fmt.Errorf("postgres CDC source: receive from slot %q: %w", r.s.cfg.slot, err)
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			if len(m.Data) == 0 {
				continue
			}
			switch m.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
				if err != nil {
					return batch(), fmt.Errorf("postgres CDC source: keepalive: %w", err)
				}
				// Between transactions, everything before the server's
				// position was sent (or had nothing for the table): move
				// there, so that the slot can release the WAL of other
				// tables' writes while this one is quiet. Not Done: a
				// transaction committing at that very LSN is still to come.
				if w := uint64(ka.ServerWALEnd); !r.st.txn.open && w > sp.LSN {
					els = append(els, elem{kind: eAdvance, lsn: w})
					sp.LSN, sp.N, sp.Done = w, 0, false
				}
				if ka.ReplyRequested {
					if err := r.sendStatus(ctx, true); err != nil {
						return batch(), err
					}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(m.Data[1:])
				if err != nil {
					return batch(), fmt.Errorf("postgres CDC source: XLogData: %w", err)
				}
				if els, err = r.handle(xld, sp, els); err != nil {
					return batch(), err
				}
			}
		case *pgproto3.ErrorResponse:
			_ = r.st.close()
			return readerbase.Batch[elem]{}, fmt.Errorf("postgres CDC source: slot %q: %w", r.s.cfg.slot, pgconn.ErrorResponseToPgError(m))
		case *pgproto3.CopyDone:
			_ = r.st.close()
			return batch(), fmt.Errorf("postgres CDC source: the server ended replication on slot %q", r.s.cfg.slot)
		}
		if len(els) > 0 {
			if d := time.Now().Add(20 * time.Millisecond); d.Before(deadline) {
				deadline = d
				if ctx.Err() == nil { // else the callback set it to now
					if err := nc.SetReadDeadline(deadline); err != nil {
						return batch(), fmt.Errorf("postgres CDC source: set read deadline: %w", err)
					}
				}
			}
		}
	}
	b := batch()
	return b, r.failed
}

// handle decodes one pgoutput message, appending elements to els. It
// drops what the split's position says was emitted already: transactions
// committed before sp.LSN, and the first sp.N changes (all, if sp.Done) of
// the transaction at sp.LSN. It moves sp (the fetcher's position) along.
func (r *splitReader[T]) handle(xld pglogrepl.XLogData, sp *Split, els []elem) ([]elem, error) {
	msg, err := pglogrepl.Parse(xld.WALData)
	if err != nil {
		return els, fmt.Errorf("postgres CDC source: decode pgoutput message at %s: %w", xld.WALStart, err)
	}
	st := r.st
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		st.rels[m.RelationID] = m
		st.ours[m.RelationID] = m.Namespace == r.t.ident[0] && m.RelationName == r.t.ident[1]
	case *pglogrepl.BeginMessage:
		l := uint64(m.FinalLSN)
		st.txn = txnState{open: true, lsn: l, xid: m.Xid, at: m.CommitTime}
		switch {
		case l < sp.LSN, l == sp.LSN && sp.Done:
			st.txn.skipAll = true
		case l == sp.LSN:
			st.txn.skipN = sp.N
		}
	case *pglogrepl.InsertMessage:
		return r.change(els, sp, OpInsert, m.RelationID, 0, nil, m.Tuple)
	case *pglogrepl.UpdateMessage:
		return r.change(els, sp, OpUpdate, m.RelationID, m.OldTupleType, m.OldTuple, m.NewTuple)
	case *pglogrepl.DeleteMessage:
		return r.change(els, sp, OpDelete, m.RelationID, m.OldTupleType, m.OldTuple, nil)
	case *pglogrepl.TruncateMessage:
		for _, id := range m.RelationIDs {
			if st.ours[id] && !st.txn.skipAll {
				// A restore would meet it again: unrecoverable.
				return els, unrecoverable{fmt.Errorf("postgres CDC source: table %s was truncated (transaction %d, LSN %s): TRUNCATE is not supported; start the source afresh", r.t.name, st.txn.xid, lsnString(st.txn.lsn))}
			}
		}
	case *pglogrepl.CommitMessage:
		st.txn.open = false
		if !st.txn.skipAll {
			els = append(els, elem{kind: eTxnDone, lsn: st.txn.lsn})
			sp.LSN, sp.N, sp.Done = st.txn.lsn, 0, true
		}
	}
	return els, nil
}

func (r *splitReader[T]) change(els []elem, sp *Split, op Op, rel uint32, oldType uint8, old, new *pglogrepl.TupleData) ([]elem, error) {
	st := r.st
	if !st.ours[rel] {
		return els, nil
	}
	st.txn.n++
	if st.txn.skipAll || st.txn.n <= st.txn.skipN {
		return els, nil
	}
	rm := st.rels[rel]
	ch := Change{Op: op, Table: r.t.name, LSN: st.txn.lsn, CommitTime: st.txn.at, Xid: st.txn.xid}
	var err error
	if old != nil {
		if ch.Before, err = r.tuple(rm, old, oldType == 'K', nil); err != nil {
			return els, err
		}
	}
	if new != nil {
		if ch.After, err = r.tuple(rm, new, false, ch.Before); err != nil {
			return els, err
		}
	}
	img := ch.After
	if img == nil {
		img = ch.Before
	}
	ch.Key = r.t.keyValue(img)
	parts := make([]string, len(r.t.keys))
	for i, k := range r.t.keys {
		v, ok := rawCol(rm, new, k.name)
		if !ok {
			v, ok = rawCol(rm, old, k.name)
		}
		if !ok {
			return els, unrecoverable{fmt.Errorf("postgres CDC source: table %s: a %s at LSN %s has no value of key column %q (the key columns must be the primary key or the replica identity's, or the table REPLICA IDENTITY FULL)", r.t.name, op, lsnString(st.txn.lsn), k.name)}
		}
		parts[i] = v
	}
	els = append(els, elem{kind: eChange, ch: ch, keyParts: parts, lsn: st.txn.lsn, n: st.txn.n})
	sp.LSN, sp.N, sp.Done = st.txn.lsn, st.txn.n, false
	return els, nil
}

// rawCol is the text form of column name in a tuple, if it has one.
func rawCol(rm *pglogrepl.RelationMessage, td *pglogrepl.TupleData, name string) (string, bool) {
	if td == nil {
		return "", false
	}
	for i, col := range rm.Columns {
		if col.Name == name && i < len(td.Columns) && td.Columns[i].DataType == pglogrepl.TupleDataTypeText {
			return string(td.Columns[i].Data), true
		}
	}
	return "", false
}

// tuple decodes a pgoutput tuple; keyOnly keeps only the key columns
// (a 'K' old tuple); an unchanged TOASTed value is taken from prev.
func (r *splitReader[T]) tuple(rm *pglogrepl.RelationMessage, td *pglogrepl.TupleData, keyOnly bool, prev map[string]any) (map[string]any, error) {
	if rm == nil {
		return nil, fmt.Errorf("postgres CDC source: a change before its relation message")
	}
	row := make(map[string]any, len(td.Columns))
	for i, c := range td.Columns {
		if i >= len(rm.Columns) {
			break
		}
		col := rm.Columns[i]
		if keyOnly && col.Flags&1 == 0 {
			continue
		}
		switch c.DataType {
		case pglogrepl.TupleDataTypeNull:
			row[col.Name] = nil
		case pglogrepl.TupleDataTypeToast:
			if v, ok := prev[col.Name]; ok {
				row[col.Name] = v
			}
		case pglogrepl.TupleDataTypeText:
			v, err := decodeText(col.DataType, c.Data)
			if err != nil {
				return nil, fmt.Errorf("postgres CDC source: table %s column %q value %q: %w", r.t.name, col.Name, c.Data, err)
			}
			row[col.Name] = v
		default:
			return nil, fmt.Errorf("postgres CDC source: table %s column %q: tuple data type %q not supported", r.t.name, col.Name, c.DataType)
		}
	}
	return row, nil
}
