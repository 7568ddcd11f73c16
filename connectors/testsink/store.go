package testsink

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Txn is one transaction of a Store, staged or committed.
type Txn[T any] struct {
	// ID is "<job>/<operator>/<subtask>/<checkpoint>" for two-phase
	// transactions, "<job>/<operator>/<subtask>/flush" for the flushes of a
	// collect sink.
	ID           string
	Job          string
	Operator     string
	Subtask      int
	CheckpointID int64 // -1 for collect sink flushes
	Records      []T
}

// Store is an in-memory external system that outlives job attempts: a
// staging area of open transactions keyed by transaction id, and an
// append-only log of committed records. Create it once per test and hand it
// to the sinks of every attempt.
//
// A Store is safe for concurrent use. Accessors return copies.
type Store[T any] struct {
	mu        sync.Mutex
	staged    map[string]*Txn[T]
	committed map[string]bool // two-phase txn ids ever committed
	log       []*Txn[T]       // committed transactions in commit order
	records   int
	aborted   []string
	global    map[int64][]string
}

// NewStore returns an empty store.
func NewStore[T any]() *Store[T] {
	return &Store[T]{staged: map[string]*Txn[T]{}, committed: map[string]bool{}, global: map[int64][]string{}}
}

// TxnID returns the deterministic transaction id of a two-phase writer's
// transaction: "<job>/<operator>/<subtask>/<checkpointID>".
func TxnID(job, operator string, subtask int, checkpointID int64) string {
	return fmt.Sprintf("%s/%s/%d/%d", job, operator, subtask, checkpointID)
}

// ErrTxnUnknown is wrapped by commit errors for a transaction that is
// neither staged nor committed (for example, one that was aborted).
var ErrTxnUnknown = errors.New("testsink: transaction neither staged nor committed")

// stage puts records under a new open transaction; the store takes
// ownership of records.
func (s *Store[T]) stage(t *Txn[T]) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.committed[t.ID] {
		return fmt.Errorf("testsink: transaction %q was already committed; checkpoint ids must not be reused", t.ID)
	}
	if _, ok := s.staged[t.ID]; ok {
		return fmt.Errorf("testsink: transaction %q is already staged; PrepareCommit twice for one checkpoint?", t.ID)
	}
	s.staged[t.ID] = t
	return nil
}

type commitResult int

const (
	commitDone commitResult = iota
	commitAlready
	commitUnknown
)

// commit moves a staged transaction to the committed log atomically.
func (s *Store[T]) commit(id string) commitResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.committed[id] {
		return commitAlready
	}
	t, ok := s.staged[id]
	if !ok {
		return commitUnknown
	}
	delete(s.staged, id)
	s.committed[id] = true
	s.log = append(s.log, t)
	s.records += len(t.Records)
	return commitDone
}

// appendCommitted adds records to the committed log directly (collect sink).
func (s *Store[T]) appendCommitted(t *Txn[T]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, t)
	s.records += len(t.Records)
}

// abortWhere drops the staged transactions for which drop returns true and
// returns their ids, sorted.
func (s *Store[T]) abortWhere(drop func(*Txn[T]) bool) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, t := range s.staged {
		if drop(t) {
			delete(s.staged, id)
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	s.aborted = append(s.aborted, ids...)
	return ids
}

// commitGlobal records the global commit of a checkpoint. Every id must have
// been committed. Repeating it is a no-op.
func (s *Store[T]) commitGlobal(checkpointID int64, ids []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if !s.committed[id] {
			return fmt.Errorf("testsink: global commit of checkpoint %d: transaction %q is not committed", checkpointID, id)
		}
	}
	merged := append(slices.Clone(s.global[checkpointID]), ids...)
	slices.Sort(merged)
	s.global[checkpointID] = slices.Compact(merged)
	return nil
}

// Committed returns every committed record, in commit order (within a
// transaction, in write order).
func (s *Store[T]) Committed() []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]T, 0, s.records)
	for _, t := range s.log {
		out = append(out, t.Records...)
	}
	return out
}

// CommittedBySubtask returns the committed records per writer subtask, each
// in commit order, for per-writer order checks.
func (s *Store[T]) CommittedBySubtask() map[int][]T {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int][]T{}
	for _, t := range s.log {
		out[t.Subtask] = append(out[t.Subtask], t.Records...)
	}
	return out
}

// CommittedTxns returns the committed transactions (and collect sink
// flushes) in commit order.
func (s *Store[T]) CommittedTxns() []Txn[T] {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Txn[T], len(s.log))
	for i, t := range s.log {
		out[i] = *t
		out[i].Records = slices.Clone(t.Records)
	}
	return out
}

// IsCommitted reports whether the transaction with this id was committed.
func (s *Store[T]) IsCommitted(txnID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed[txnID]
}

// CommitCount returns how many two-phase transactions were committed (each
// counted once, however often its commit was repeated).
func (s *Store[T]) CommitCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.committed)
}

// Staged returns the ids of the open (staged, not committed) transactions,
// sorted.
func (s *Store[T]) Staged() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.staged))
}

// StagedRecords returns the records of an open transaction, or nil.
func (s *Store[T]) StagedRecords(txnID string) []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.staged[txnID]; ok {
		return slices.Clone(t.Records)
	}
	return nil
}

// Aborted returns the ids of the transactions aborted on recovery, in abort
// order.
func (s *Store[T]) Aborted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.aborted)
}

// GlobalCommits returns, per checkpoint id, the sorted transaction ids the
// global committer committed.
func (s *Store[T]) GlobalCommits() map[int64][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int64][]string, len(s.global))
	for id, ids := range s.global {
		out[id] = slices.Clone(ids)
	}
	return out
}

// Final is the end-of-test view: the committed records (as Committed) and
// an error naming the open transactions if any is still staged. After a
// finished job nothing may be staged: every prepared transaction was either
// committed or aborted on recovery.
func (s *Store[T]) Final() ([]T, error) {
	s.mu.Lock()
	open := slices.Sorted(maps.Keys(s.staged))
	s.mu.Unlock()
	recs := s.Committed()
	if len(open) > 0 {
		return recs, fmt.Errorf("testsink: %d transaction(s) still staged: %s", len(open), strings.Join(open, ", "))
	}
	return recs, nil
}
