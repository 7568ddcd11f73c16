package checkpoint

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Memory stores snapshots in memory, for jobs without a checkpoint
// directory. It has the semantics of Local (retention, savepoints never
// pruned, ErrExists, ErrNotFound) except that nothing is ever corrupt and
// Info.Path is empty. Save and Latest deep-copy every blob, so neither side
// can alias the other's memory. Memory is safe for concurrent use.
type Memory struct {
	retain int

	mu    sync.Mutex
	snaps map[memKey]memEntry
}

type memKey struct {
	kind Kind
	id   int64
}

type memEntry struct {
	snap *Snapshot
	info Info
}

// NewMemory returns an empty in-memory storage. Options: Retain (default 3).
func NewMemory(opts ...Option) *Memory {
	o := newOptions(opts)
	return &Memory{retain: o.retain, snaps: make(map[memKey]memEntry)}
}

// Save stores a deep copy of s. See Local.Save.
func (m *Memory) Save(ctx context.Context, s *Snapshot) (Info, error) {
	if err := validate(s); err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, fmt.Errorf("%s %d: save: %w", s.Kind, s.ID, err)
	}
	c := cloneSnapshot(s)
	c.Timestamp = normalizeTime(s.Timestamp)
	info := Info{ID: c.ID, Kind: c.Kind, JobName: c.JobName, Timestamp: c.Timestamp, Size: encodedSize(c)}

	m.mu.Lock()
	defer m.mu.Unlock()
	key := memKey{c.Kind, c.ID}
	if _, ok := m.snaps[key]; ok {
		return Info{}, fmt.Errorf("%s %d: save: %w", c.Kind, c.ID, ErrExists)
	}
	m.snaps[key] = memEntry{snap: c, info: info}
	if c.Kind == Checkpoint && m.retain > 0 {
		var ids []int64
		for k := range m.snaps {
			if k.kind == Checkpoint && k.id != c.ID {
				ids = append(ids, k.id)
			}
		}
		slices.Sort(ids)
		for _, id := range ids[:max(len(ids)+1-m.retain, 0)] {
			delete(m.snaps, memKey{Checkpoint, id})
		}
	}
	return info, nil
}

// Latest returns a deep copy of the checkpoint with the highest ID, or an
// error wrapping ErrNotFound.
func (m *Memory) Latest(ctx context.Context) (*Snapshot, Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, Info{}, fmt.Errorf("latest checkpoint: %w", err)
	}
	m.mu.Lock()
	var latest *memEntry
	for k, e := range m.snaps {
		if k.kind == Checkpoint && (latest == nil || k.id > latest.info.ID) {
			latest = &e
		}
	}
	m.mu.Unlock()
	if latest == nil {
		return nil, Info{}, fmt.Errorf("latest checkpoint in memory: %w", ErrNotFound)
	}
	// Stored snapshots are never modified, so copying outside the lock is safe.
	return cloneSnapshot(latest.snap), latest.info, nil
}

// Get returns a deep copy of the snapshot of the given kind and id, or an
// error wrapping ErrNotFound.
func (m *Memory) Get(ctx context.Context, kind Kind, id int64) (*Snapshot, Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, Info{}, fmt.Errorf("%s %d: load: %w", kind, id, err)
	}
	m.mu.Lock()
	e, ok := m.snaps[memKey{kind, id}]
	m.mu.Unlock()
	if !ok {
		return nil, Info{}, fmt.Errorf("%s %d in memory: %w", kind, id, ErrNotFound)
	}
	return cloneSnapshot(e.snap), e.info, nil
}

// List lists the stored snapshots, oldest first (see ListDir for the order).
func (m *Memory) List(ctx context.Context) ([]Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	m.mu.Lock()
	infos := make([]Info, 0, len(m.snaps))
	for _, e := range m.snaps {
		infos = append(infos, e.info)
	}
	m.mu.Unlock()
	slices.SortFunc(infos, func(a, b Info) int {
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Kind, b.Kind))
	})
	return infos, nil
}

// Discard removes the checkpoint and/or savepoint with the given id, or
// returns an error wrapping ErrNotFound.
func (m *Memory) Discard(ctx context.Context, id int64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("discard snapshot %d: %w", id, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	found := false
	for _, k := range []Kind{Checkpoint, Savepoint} {
		if _, ok := m.snaps[memKey{k, id}]; ok {
			delete(m.snaps, memKey{k, id})
			found = true
		}
	}
	if !found {
		return fmt.Errorf("discard snapshot %d in memory: %w", id, ErrNotFound)
	}
	return nil
}

// cloneSnapshot deep-copies s, keeping nil and empty apart.
func cloneSnapshot(s *Snapshot) *Snapshot {
	c := *s
	c.Enumerators = cloneMap(s.Enumerators, bytes.Clone)
	c.Properties = maps.Clone(s.Properties)
	if s.Tasks != nil {
		c.Tasks = make([]TaskState, len(s.Tasks))
		for i, t := range s.Tasks {
			t.Parts = cloneMap(t.Parts, cloneBlobs)
			c.Tasks[i] = t
		}
	}
	return &c
}

func cloneBlobs(bs [][]byte) [][]byte {
	if bs == nil {
		return nil
	}
	c := make([][]byte, len(bs))
	for i, b := range bs {
		c[i] = bytes.Clone(b)
	}
	return c
}

func cloneMap[V any](m map[string]V, clone func(V) V) map[string]V {
	if m == nil {
		return nil
	}
	c := make(map[string]V, len(m))
	for k, v := range m {
		c[k] = clone(v)
	}
	return c
}
