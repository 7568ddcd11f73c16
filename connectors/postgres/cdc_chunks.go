package postgres

import (
	"maps"

	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/enumerate"
)

// The CDC source's parallel snapshot. The enumerator hands out chunk
// splits (CDC = true) and then the stream split (Waiting, Chunks = their
// number). A reader reads a chunk's pages like the stream split's own
// snapshot, each recording its snapshot (a Segment). When a chunk is read
// to its end the reader sends its pages to the enumerator (chunkDone) and
// keeps the finished chunk in its checkpoints until the enumerator
// acknowledged it (chunkAck): the enumerator's snapshot of a checkpoint
// is taken before the readers', so a chunk finished just before a
// checkpoint may be in neither the enumerator's state nor the reader's
// splits otherwise. Once acknowledged, every later checkpoint has the
// pages in the enumerator's state (the acknowledgement reaches the reader
// through its mailbox after the trigger of any checkpoint whose enumerator
// snapshot preceded it). A restored finished chunk is reported again. The
// enumerator sends the pages it has to every reader (chunksEvent) when
// they change and when a reader registers; the reader holding the waiting
// stream split starts it once it has the pages of all its Chunks.

// chunkDone reports a finished chunk's pages to the enumerator.
type chunkDone struct {
	ID       string
	Segments []Segment
}

// chunkAck acknowledges a chunkDone.
type chunkAck struct{ ID string }

// chunksEvent is the pages of every finished chunk the enumerator has.
type chunksEvent struct{ Chunks map[string][]Segment }

// enumerator is the Discovered enumerator plus the CDC chunks' pages.
//
// A chunk's pages are sent to the readers only once they are durable: in
// the enumerator state of a completed checkpoint. Until then a reader that
// fails and restarts alone (regional failover; the enumerator keeps its
// memory) may read the chunk again from its checkpoint with other
// snapshots, and the pages it reported before are void: they are dropped
// when the reader registers again, and it reports the chunk anew.
type enumerator struct {
	*enumerate.Discovered[Split]
	ctx    source.EnumeratorContext[Split]
	chunks map[string]*chunkEntry
	inSnap map[int64][]*chunkEntry // checkpoint → entries not yet durable it holds
}

type chunkEntry struct {
	segs    []Segment
	from    int // the reporting subtask
	durable bool
}

func newEnumerator(d *enumerate.Discovered[Split], ctx source.EnumeratorContext[Split], restored map[string][]Segment) *enumerator {
	e := &enumerator{Discovered: d, ctx: ctx, chunks: map[string]*chunkEntry{}, inSnap: map[int64][]*chunkEntry{}}
	for id, segs := range restored { // in a completed checkpoint: durable
		e.chunks[id] = &chunkEntry{segs: segs, from: -1, durable: true}
	}
	return e
}

var (
	_ source.EnumeratorEventHandler = (*enumerator)(nil)
	_ source.CheckpointListener     = (*enumerator)(nil)
)

// HandleSourceEvent records a finished chunk's pages and acknowledges them.
func (e *enumerator) HandleSourceEvent(subtask int, ev source.Event) error {
	d, ok := ev.(chunkDone)
	if !ok {
		return nil
	}
	if old := e.chunks[d.ID]; old == nil || !old.durable {
		e.chunks[d.ID] = &chunkEntry{segs: d.Segments, from: subtask}
	}
	e.ctx.SendEventToReader(subtask, chunkAck{ID: d.ID})
	return nil
}

// durable returns the pages of the durable chunks.
func (e *enumerator) durable() chunksEvent {
	m := map[string][]Segment{}
	for id, c := range e.chunks {
		if c.durable {
			m[id] = c.segs
		}
	}
	return chunksEvent{Chunks: m}
}

// AddReader registers a reader (again, after a restart: the pages it
// reported that are not durable are dropped) and sends it the durable
// pages.
func (e *enumerator) AddReader(subtask int) error {
	if err := e.Discovered.AddReader(subtask); err != nil {
		return err
	}
	maps.DeleteFunc(e.chunks, func(_ string, c *chunkEntry) bool { return !c.durable && c.from == subtask })
	if ev := e.durable(); len(ev.Chunks) > 0 {
		e.ctx.SendEventToReader(subtask, ev)
	}
	return nil
}

// SnapshotState adds the chunks' pages to the Discovered state.
func (e *enumerator) SnapshotState(id int64) (EnumState, error) {
	st, err := e.Discovered.SnapshotState(id)
	if err != nil {
		return EnumState{}, err
	}
	chunks := map[string][]Segment{}
	var pending []*chunkEntry
	for cid, c := range e.chunks {
		chunks[cid] = c.segs
		if !c.durable {
			pending = append(pending, c)
		}
	}
	if len(pending) > 0 {
		e.inSnap[id] = pending
	}
	return EnumState{DiscoveredState: st, Chunks: chunks}, nil
}

// NotifyCheckpointComplete makes the pages of the checkpoint durable and
// sends the durable pages to every reader when they changed.
func (e *enumerator) NotifyCheckpointComplete(id int64) error {
	changed := false
	for cid, entries := range e.inSnap {
		if cid > id {
			continue
		}
		for _, c := range entries {
			if !c.durable {
				c.durable, changed = true, true
			}
		}
		delete(e.inSnap, cid)
	}
	if changed {
		ev := e.durable()
		for sub := range e.ctx.RegisteredReaders() {
			e.ctx.SendEventToReader(sub, ev)
		}
	}
	return nil
}
