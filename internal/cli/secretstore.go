package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/internal/engine"
)

// SecretRefsProperty marks a snapshot whose strings and blobs hold
// references to environment variables instead of their values (see
// secretref.go). Its value is "1", or "1n" when the snapshot had no
// properties at all. Only a snapshot with it is decoded on load, so a
// snapshot written without secrets (or by a library program) is read as
// it is.
const SecretRefsProperty = "sluice.secret-refs"

// encodeSnapshot returns a copy of s with every value of c replaced by its
// reference, marked with SecretRefsProperty. s is not changed (the runtime
// keeps it as its in-memory restore point).
func (c *secretCodec) encodeSnapshot(s *checkpoint.Snapshot) *checkpoint.Snapshot {
	e := func(v string) string { return string(c.encode([]byte(v))) }
	out := &checkpoint.Snapshot{ID: s.ID, Kind: s.Kind, JobName: e(s.JobName), Timestamp: s.Timestamp}
	if s.Enumerators != nil {
		out.Enumerators = make(map[string][]byte, len(s.Enumerators))
		for k, v := range s.Enumerators {
			out.Enumerators[e(k)] = c.encode(v)
		}
	}
	if s.Tasks != nil {
		out.Tasks = make([]checkpoint.TaskState, len(s.Tasks))
		for i, t := range s.Tasks {
			nt := checkpoint.TaskState{Vertex: e(t.Vertex), Subtask: t.Subtask, Parallelism: t.Parallelism}
			if t.Parts != nil {
				nt.Parts = make(map[string][][]byte, len(t.Parts))
				for name, blobs := range t.Parts {
					var nb [][]byte
					if blobs != nil {
						nb = make([][]byte, len(blobs))
						for j, b := range blobs {
							nb[j] = c.encode(b)
						}
					}
					nt.Parts[e(name)] = nb
				}
			}
			out.Tasks[i] = nt
		}
	}
	out.Properties = make(map[string]string, len(s.Properties)+1)
	for k, v := range s.Properties {
		if k != SecretRefsProperty {
			out.Properties[e(k)] = e(v)
		}
	}
	out.Properties[SecretRefsProperty] = "1"
	if s.Properties == nil {
		out.Properties[SecretRefsProperty] = "1n"
	}
	return out
}

// decodeSnapshot reverses encodeSnapshot in place, looking the variables
// up with lookup. A snapshot without SecretRefsProperty is left as it is.
// Errors wrap an *unsetVarError naming a variable that is not set, or
// checkpoint.ErrCorrupt.
func decodeSnapshot(s *checkpoint.Snapshot, lookup func(string) (string, bool)) error {
	mark, ok := s.Properties[SecretRefsProperty]
	if !ok {
		return nil
	}
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	if mark != "1" && mark != "1n" {
		return fmt.Errorf("%s %d: property %s=%q: %w (written by a newer sluice?)", s.Kind, s.ID, SecretRefsProperty, mark, checkpoint.ErrCorrupt)
	}
	var err error
	d := func(v []byte) []byte {
		if err != nil {
			return nil
		}
		var out []byte
		out, err = decodeRefs(v, lookup)
		return out
	}
	ds := func(v string) string { return string(d([]byte(v))) }
	s.JobName = ds(s.JobName)
	if s.Enumerators != nil {
		m := make(map[string][]byte, len(s.Enumerators))
		for k, v := range s.Enumerators {
			m[ds(k)] = d(v)
		}
		s.Enumerators = m
	}
	for i := range s.Tasks {
		t := &s.Tasks[i]
		t.Vertex = ds(t.Vertex)
		if t.Parts != nil {
			m := make(map[string][][]byte, len(t.Parts))
			for name, blobs := range t.Parts {
				for j := range blobs {
					blobs[j] = d(blobs[j])
				}
				m[ds(name)] = blobs
			}
			t.Parts = m
		}
	}
	props := make(map[string]string, len(s.Properties))
	for k, v := range s.Properties {
		if k != SecretRefsProperty {
			props[ds(k)] = ds(v)
		}
	}
	if mark == "1n" && len(props) == 0 {
		props = nil
	}
	s.Properties = props
	if err != nil {
		if u, ok := errors.AsType[*unsetVarError](err); ok {
			return fmt.Errorf("%s %d: %w", s.Kind, s.ID, u)
		}
		return fmt.Errorf("%s %d: %w: %w", s.Kind, s.ID, checkpoint.ErrCorrupt, err)
	}
	return nil
}

// secretStorage is a checkpoint.Storage that keeps the values of codec
// out of what inner stores (encodeSnapshot) and restores them on load
// (decodeSnapshot with lookup). Savepoints the runtime writes go through
// it too (engine.SavepointStorage).
type secretStorage struct {
	inner  checkpoint.Storage
	codec  *secretCodec
	lookup func(string) (string, bool)
}

var _ engine.SavepointStorage = (*secretStorage)(nil)

func (s *secretStorage) Save(ctx context.Context, snap *checkpoint.Snapshot) (checkpoint.Info, error) {
	return s.inner.Save(ctx, s.codec.encodeSnapshot(snap))
}

func (s *secretStorage) Latest(ctx context.Context) (*checkpoint.Snapshot, checkpoint.Info, error) {
	snap, info, err := s.inner.Latest(ctx)
	if err != nil {
		return snap, info, err
	}
	if err := decodeSnapshot(snap, s.lookup); err != nil {
		return nil, info, err
	}
	return snap, info, nil
}

func (s *secretStorage) List(ctx context.Context) ([]checkpoint.Info, error) {
	return s.inner.List(ctx)
}

func (s *secretStorage) Discard(ctx context.Context, id int64) error {
	return s.inner.Discard(ctx, id)
}

// SaveSavepoint writes snap, encoded, as a savepoint under dir.
func (s *secretStorage) SaveSavepoint(ctx context.Context, dir string, snap *checkpoint.Snapshot) (checkpoint.Info, error) {
	return checkpoint.SaveSavepoint(ctx, dir, s.codec.encodeSnapshot(snap))
}

// secretJobStorage is a secretStorage over a storage that belongs to one
// job (checkpoint.Local): the runtime locks it and records the job id.
type secretJobStorage struct {
	secretStorage
	job engine.JobStorage
}

var _ engine.JobStorage = (*secretJobStorage)(nil)

func (s *secretJobStorage) Lock() (func(), error)    { return s.job.Lock() }
func (s *secretJobStorage) JobID() (string, error)   { return s.job.JobID() }
func (s *secretJobStorage) SetJobID(id string) error { return s.job.SetJobID(id) }

// withSecrets wraps inner so that the values in vals never reach it; with
// no values it returns inner.
func withSecrets(inner checkpoint.Storage, vals map[string]string, lookup func(string) (string, bool)) checkpoint.Storage {
	if len(vals) == 0 {
		return inner
	}
	ss := secretStorage{inner: inner, codec: newSecretCodec(vals), lookup: lookup}
	if js, ok := inner.(engine.JobStorage); ok {
		return &secretJobStorage{secretStorage: ss, job: js}
	}
	return &ss
}

// secretLookup looks a variable up in vals (the pipeline's), then in the
// environment.
func secretLookup(vals map[string]string, getenv func(string) (string, bool)) func(string) (string, bool) {
	vals = maps.Clone(vals)
	return func(name string) (string, bool) {
		if v, ok := vals[name]; ok {
			return v, true
		}
		if getenv == nil {
			return "", false
		}
		return getenv(name)
	}
}
