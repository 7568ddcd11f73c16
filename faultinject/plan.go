package faultinject

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
)

// Kind is where a fault strikes.
type Kind int

const (
	// AfterRecords: a reader subtask fails in the PollNext call in which
	// it tries to emit record Records+1 of the current attempt: exactly
	// Records records get through (on the reader's output and its
	// per-split outputs together), the rest of that call's records are
	// withheld, and PollNext returns the error. A reader that ends after
	// exactly Records records does not fail.
	AfterRecords Kind = iota
	// DuringSnapshot: at checkpoint Checkpoint, the reader's SnapshotState
	// or the writer's PrepareCommit / SnapshotState of the subtask fails,
	// whichever wrapped component gets there first.
	DuringSnapshot
	// BeforeCommit: the committer of the subtask fails before committing
	// checkpoint Checkpoint's committables ("between prepare and commit"):
	// nothing is committed and every request fails with an unknown reason.
	BeforeCommit
	// DuringCommit: the committer commits checkpoint Checkpoint's
	// committables, then fails before returning: every request fails with
	// an unknown reason, and the next attempt must commit them again,
	// idempotently.
	DuringCommit
	// WriterAfterRecords: a writer subtask fails in Write for record
	// Records+1 of the current attempt (that record is not written).
	WriterAfterRecords
	// AfterPrepareCommit: at the first checkpoint at or after Checkpoint
	// at which the writer's real PrepareCommit returns committables, the
	// call fails after it: whatever the sink prepared (a transaction, a
	// staged file) is left behind, and its committables are lost with the
	// failed checkpoint. A PrepareCommit that returns none (nothing
	// written since the last one, or a sink without committer) never
	// fires it. The sink must
	// abort it when it recovers, as after a crash right after
	// pre-committing.
	AfterPrepareCommit
)

var kindNames = [...]string{"AfterRecords", "DuringSnapshot", "BeforeCommit", "DuringCommit", "WriterAfterRecords", "AfterPrepareCommit"}

// Kinds returns the kinds AfterRecords, DuringSnapshot, BeforeCommit,
// DuringCommit and WriterAfterRecords. AfterPrepareCommit, added later, is
// not among them, so that plans drawn by [RandomPlan] from a seed stay what
// they were; append it to draw it too.
func Kinds() []Kind {
	return []Kind{AfterRecords, DuringSnapshot, BeforeCommit, DuringCommit, WriterAfterRecords}
}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// countsRecords reports whether the kind uses Fault.Records (else
// Fault.Checkpoint).
func (k Kind) countsRecords() bool { return k == AfterRecords || k == WriterAfterRecords }

// AnySubtask in Fault.Subtask matches every subtask; the first to get there
// fires the fault.
const AnySubtask = -1

// Fault is one planned failure.
type Fault struct {
	Kind Kind
	// Subtask is the reader, writer or committer subtask that fails, or
	// AnySubtask.
	Subtask int
	// Records is the count after which AfterRecords and WriterAfterRecords
	// fire (per attempt).
	Records int64
	// Checkpoint is the checkpoint id at (or after) which DuringSnapshot,
	// BeforeCommit and DuringCommit fire.
	Checkpoint int64
}

func (f Fault) String() string {
	sub := "any"
	if f.Subtask != AnySubtask {
		sub = fmt.Sprint(f.Subtask)
	}
	if f.Kind.countsRecords() {
		return fmt.Sprintf("%v(subtask=%s, records=%d)", f.Kind, sub, f.Records)
	}
	return fmt.Sprintf("%v(subtask=%s, checkpoint=%d)", f.Kind, sub, f.Checkpoint)
}

func (f Fault) matches(k Kind, subtask int) bool {
	return f.Kind == k && (f.Subtask == AnySubtask || f.Subtask == subtask)
}

// ErrInjected is wrapped by every error of an injected fault.
var ErrInjected = errors.New("faultinject: injected fault")

// InjectedError is the error of a fault that fired.
type InjectedError struct {
	Fault Fault
	// Where says what failed, for example "reader subtask 1 after 100
	// records, attempt 0".
	Where string
}

func (e *InjectedError) Error() string {
	return fmt.Sprintf("faultinject: injected fault %v: %s", e.Fault, e.Where)
}

// Unwrap returns ErrInjected.
func (e *InjectedError) Unwrap() error { return ErrInjected }

// Plan is a set of faults, each firing at most once across all attempts.
// Share one *Plan between the attempts of a job. A Plan is safe for
// concurrent use; a nil *Plan injects nothing.
type Plan struct {
	faults []Fault
	fired  []atomic.Bool
	nfired atomic.Int64 // len(order)
	crash  bool
	mu     sync.Mutex
	order  []int // indexes of fired faults, in firing order
	// abandoned writers, closed by CloseAbandoned (crash mode).
	abandoned []io.Closer
}

// NewPlan returns a plan of the given faults.
func NewPlan(faults ...Fault) *Plan {
	return &Plan{faults: append([]Fault(nil), faults...), fired: make([]atomic.Bool, len(faults))}
}

// RandomPlan returns a reproducible plan of n faults drawn with
// math/rand/v2 from seed: each fault's kind is one of kinds, its subtask in
// [0, parallelism), its Records in [1, maxRecords] or its Checkpoint in
// [1, maxCheckpoint], as its kind needs (the other field is 0). It panics
// if kinds is empty or parallelism, maxRecords or maxCheckpoint is below 1
// while needed.
func RandomPlan(seed int64, n int, kinds []Kind, parallelism int, maxRecords, maxCheckpoint int64) *Plan {
	if len(kinds) == 0 || parallelism < 1 {
		panic(fmt.Sprintf("faultinject.RandomPlan: need kinds and parallelism >= 1 (got %d kinds, parallelism %d)", len(kinds), parallelism))
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed_fa17_1e55_c0de))
	faults := make([]Fault, 0, max(n, 0))
	for range n {
		f := Fault{Kind: kinds[rng.IntN(len(kinds))], Subtask: rng.IntN(parallelism)}
		if f.Kind.countsRecords() {
			if maxRecords < 1 {
				panic(fmt.Sprintf("faultinject.RandomPlan: %v needs maxRecords >= 1, got %d", f.Kind, maxRecords))
			}
			f.Records = 1 + rng.Int64N(maxRecords)
		} else {
			if maxCheckpoint < 1 {
				panic(fmt.Sprintf("faultinject.RandomPlan: %v needs maxCheckpoint >= 1, got %d", f.Kind, maxCheckpoint))
			}
			f.Checkpoint = 1 + rng.Int64N(maxCheckpoint)
		}
		faults = append(faults, f)
	}
	return NewPlan(faults...)
}

// Faults returns all faults of the plan, in plan order.
func (p *Plan) Faults() []Fault {
	if p == nil {
		return nil
	}
	return append([]Fault(nil), p.faults...)
}

// Fired returns the faults that fired, in firing order.
func (p *Plan) Fired() []Fault {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Fault, len(p.order))
	for i, j := range p.order {
		out[i] = p.faults[j]
	}
	return out
}

// Pending returns the faults that have not fired yet, in plan order.
func (p *Plan) Pending() []Fault {
	if p == nil {
		return nil
	}
	var out []Fault
	for i := range p.faults {
		if !p.fired[i].Load() {
			out = append(out, p.faults[i])
		}
	}
	return out
}

// String lists the faults, marking those that fired, for logs.
func (p *Plan) String() string {
	if p == nil {
		return "faultinject.Plan{}"
	}
	var b strings.Builder
	b.WriteString("faultinject.Plan{")
	for i, f := range p.faults {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.String())
		if p.fired[i].Load() {
			b.WriteString(" [fired]")
		}
	}
	b.WriteString("}")
	return b.String()
}

// fire marks fault i fired; it reports false if it had fired before.
func (p *Plan) fire(i int) bool {
	if !p.fired[i].CompareAndSwap(false, true) {
		return false
	}
	p.mu.Lock()
	p.order = append(p.order, i)
	p.nfired.Add(1)
	p.mu.Unlock()
	return true
}

// Crash turns on crash mode and returns p: a wrapped writer of an attempt
// in which a fault fired (anywhere) is abandoned when the runtime closes
// it, as kill -9 abandons a process's writers: its Close does not run, so
// a sink cannot rely on Close to abort what it prepared or staged. The
// abandoned writers are closed by [Plan.CloseAbandoned], which a test calls
// after it checked what the job left behind. Call Crash before the job
// starts. By default (no crash mode) every writer is closed as usual.
func (p *Plan) Crash() *Plan {
	p.crash = true
	return p
}

// CloseAbandoned closes the writers crash mode abandoned and returns their
// errors joined. Call it once the job ended, to release their resources.
func (p *Plan) CloseAbandoned() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	ws := p.abandoned
	p.abandoned = nil
	p.mu.Unlock()
	var errs []error
	for _, w := range ws {
		errs = append(errs, w.Close())
	}
	return errors.Join(errs...)
}

// abandon keeps w for CloseAbandoned if p is in crash mode and a fault
// fired since firedAtStart; it reports whether it kept it.
func (p *Plan) abandon(w io.Closer, firedAtStart int64) bool {
	if p == nil || !p.crash || p.nfired.Load() <= firedAtStart {
		return false
	}
	p.mu.Lock()
	p.abandoned = append(p.abandoned, w)
	p.mu.Unlock()
	return true
}

// firedCount returns how many faults fired so far.
func (p *Plan) firedCount() int64 {
	if p == nil {
		return 0
	}
	return p.nfired.Load()
}

// fireAt fires the first unfired fault of kind k for subtask whose
// Checkpoint is at most checkpointID, and returns its error, or nil.
func (p *Plan) fireAt(k Kind, subtask int, checkpointID int64, where string) error {
	if p == nil {
		return nil
	}
	for i, f := range p.faults {
		if f.matches(k, subtask) && checkpointID >= f.Checkpoint && !p.fired[i].Load() && p.fire(i) {
			return &InjectedError{Fault: f, Where: where}
		}
	}
	return nil
}

// counter counts records for the AfterRecords kinds of one subtask in one
// attempt. It is used from one goroutine.
type counter struct {
	plan    *Plan
	kind    Kind
	subtask int
	what    string // "reader subtask 1" …
	attempt int
	cands   []int // indexes of matching faults
	count   int64
	next    int64 // smallest Records of an unfired candidate
	tripped error
}

func newCounter(p *Plan, k Kind, subtask, attempt int, what string) *counter {
	c := &counter{plan: p, kind: k, subtask: subtask, attempt: attempt, what: what}
	if p != nil {
		for i, f := range p.faults {
			if f.matches(k, subtask) {
				c.cands = append(c.cands, i)
			}
		}
	}
	c.recompute()
	return c
}

func (c *counter) recompute() {
	c.next = 1<<63 - 1
	for _, i := range c.cands {
		if !c.plan.fired[i].Load() {
			c.next = min(c.next, c.plan.faults[i].Records)
		}
	}
}

// check fires a due fault, if any; it reports whether the counter tripped.
func (c *counter) check() bool {
	if c.tripped != nil {
		return true
	}
	if c.count < c.next {
		return false
	}
	for _, i := range c.cands {
		f := c.plan.faults[i]
		if f.Records <= c.count && c.plan.fire(i) {
			c.tripped = &InjectedError{Fault: f, Where: fmt.Sprintf("%s after %d records, attempt %d", c.what, c.count, c.attempt)}
			return true
		}
	}
	c.recompute() // the due faults fired elsewhere
	return false
}

// admit counts one record; it reports false if the record must be withheld
// because a fault fired.
func (c *counter) admit() bool {
	if c.tripped != nil || (c.count >= c.next && c.check()) {
		return false
	}
	c.count++
	return true
}
