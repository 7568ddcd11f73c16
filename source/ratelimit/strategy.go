package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrInvalidStrategy is wrapped by the errors of strategies with invalid
// arguments and of strategies that give a reader no records at all.
var ErrInvalidStrategy = errors.New("ratelimit: invalid strategy")

type strategyKind int

const (
	perSecondTotal strategyKind = iota + 1
	perSecondSubtask
	perCheckpointTaken
	perCheckpointCompleted
)

// Strategy says how many records the readers of a wrapped source may emit.
// Make one with [PerSecond], [PerSubtaskPerSecond], [PerCheckpoint] or
// [PerCompletedCheckpoint]; the zero Strategy is invalid. A Strategy with
// invalid arguments does not panic: [Wrap] records the error, and the job
// fails at start with it.
type Strategy struct {
	kind strategyKind
	rate float64 // records per second
	n    int64   // records per checkpoint
	err  error
}

// PerSecond limits the whole source to r records per second, divided
// evenly over its parallel readers: each reader may emit r/parallelism
// records per second, whether or not it has splits (Flink's
// RateLimiterStrategy.perSecond). r must be positive and finite.
func PerSecond(r float64) Strategy {
	return Strategy{kind: perSecondTotal, rate: r, err: checkRate("PerSecond", r)}
}

// PerSubtaskPerSecond limits every parallel reader to r records per
// second, so the source emits up to r·parallelism. r must be positive and
// finite.
func PerSubtaskPerSecond(r float64) Strategy {
	return Strategy{kind: perSecondSubtask, rate: r, err: checkRate("PerSubtaskPerSecond", r)}
}

// PerCheckpoint lets the whole source emit at most n records between two
// checkpoints. n is divided over the parallel readers (n/parallelism each,
// one more for the first n%parallelism), and it must give every reader at
// least one record. A reader that has spent its share emits nothing more
// until it takes its next checkpoint (its SnapshotState), then starts a new
// share; see the package documentation for the overshoot of readers that
// emit many records per poll. The first share is available at once.
//
// Unlike Flink's RateLimiterStrategy.perCheckpoint, the share is renewed when
// the checkpoint is taken, not when it completes, so that every checkpoint
// interval can hold a full share; [PerCompletedCheckpoint] behaves like
// Flink's. Without checkpointing, a reader that spent its share never
// emits again.
func PerCheckpoint(n int64) Strategy {
	return Strategy{kind: perCheckpointTaken, n: n, err: checkCount("PerCheckpoint", n)}
}

// PerCompletedCheckpoint is [PerCheckpoint] with Flink's GatedRateLimiter
// behaviour: a reader's share is renewed when a checkpoint completes (the
// reader is told of it), so at most about n records of the source are ever
// emitted but not yet covered by a completed checkpoint. The first share is
// available at once.
func PerCompletedCheckpoint(n int64) Strategy {
	return Strategy{kind: perCheckpointCompleted, n: n, err: checkCount("PerCompletedCheckpoint", n)}
}

func checkRate(name string, r float64) error {
	if !(r > 0) || math.IsInf(r, 0) {
		return fmt.Errorf("%w: %s(%v): the rate must be positive and finite", ErrInvalidStrategy, name, r)
	}
	return nil
}

func checkCount(name string, n int64) error {
	if n < 1 {
		return fmt.Errorf("%w: %s(%d): the number of records must be at least 1", ErrInvalidStrategy, name, n)
	}
	return nil
}

func (s Strategy) String() string {
	switch s.kind {
	case perSecondTotal:
		return fmt.Sprintf("PerSecond(%v)", s.rate)
	case perSecondSubtask:
		return fmt.Sprintf("PerSubtaskPerSecond(%v)", s.rate)
	case perCheckpointTaken:
		return fmt.Sprintf("PerCheckpoint(%d)", s.n)
	case perCheckpointCompleted:
		return fmt.Sprintf("PerCompletedCheckpoint(%d)", s.n)
	}
	return "Strategy(invalid)"
}

func (s Strategy) validate() error {
	if s.kind == 0 {
		return fmt.Errorf("%w: the zero Strategy; use PerSecond, PerSubtaskPerSecond, PerCheckpoint or PerCompletedCheckpoint", ErrInvalidStrategy)
	}
	return s.err
}

// newLimiter makes the limiter of one reader.
func (s Strategy) newLimiter(subtask, parallelism int, o *options) (limiter, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	p := max(parallelism, 1)
	switch s.kind {
	case perSecondTotal, perSecondSubtask:
		rate := s.rate
		if s.kind == perSecondTotal {
			rate /= float64(p)
		}
		return newBucket(rate, o.burst, o.clock.Now), nil
	}
	share := s.n / int64(p)
	if int64(subtask) < s.n%int64(p) {
		share++
	}
	if share < 1 {
		return nil, fmt.Errorf("%w: %v gives reader %d of %d no records; allow at least one record per reader", ErrInvalidStrategy, s, subtask, p)
	}
	return &gate{share: share, left: share, onComplete: s.kind == perCheckpointCompleted}, nil
}

// limiter is the budget of one reader. It is used from the reader's
// subtask goroutine only.
type limiter interface {
	// ready reports whether the reader may poll now.
	ready() bool
	// take charges n emitted records (n ≥ 0; the budget may go negative).
	take(n int)
	// wait says how to wait when not ready: after d, or (gated) until a
	// checkpoint renews the budget.
	wait() (d time.Duration, gated bool)
	// checkpoint is called when the reader snapshots (taken) or is told
	// that a checkpoint completed (!taken). It reports whether the budget
	// was renewed.
	checkpoint(taken bool) bool
}

// bucket is a token bucket with debt: tokens accumulate at rate per second,
// every emitted record costs one, and a poll that emits more than there are
// tokens leaves the bucket negative. It starts empty.
type bucket struct {
	now    func() time.Time
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
	prev   int // records of the last poll that emitted any
}

func newBucket(rate float64, burst time.Duration, now func() time.Time) *bucket {
	return &bucket{now: now, rate: rate, burst: max(1, math.Floor(rate*burst.Seconds())), last: now()}
}

// refill adds the tokens of the time passed. The bucket saves at most one
// burst beyond the next poll's need, so a late wake-up loses nothing but an
// idle reader catches up by one burst at most.
func (b *bucket) refill() {
	t := b.now()
	if d := t.Sub(b.last); d > 0 {
		b.tokens = min(b.burst+b.need(), b.tokens+d.Seconds()*b.rate)
	}
	b.last = t
}

// need is what the bucket must hold before the next poll: what the last
// non-empty poll emitted, capped at the burst; the burst before the first.
func (b *bucket) need() float64 {
	if b.prev == 0 {
		return b.burst
	}
	return min(float64(b.prev), b.burst)
}

// epsilon absorbs floating-point error, so that a timer armed for the exact
// delay finds the tokens it waited for.
const epsilon = 1e-9

func (b *bucket) ready() bool {
	b.refill()
	return b.tokens >= b.need()-epsilon
}

func (b *bucket) take(n int) {
	if n > 0 {
		b.tokens -= float64(n)
		b.prev = n
	}
}

func (b *bucket) wait() (time.Duration, bool) {
	b.refill()
	missing := b.need() - b.tokens
	if missing <= 0 {
		return 0, false
	}
	return max(time.Duration(math.Ceil(missing/b.rate*float64(time.Second))), 1), false
}

func (b *bucket) checkpoint(bool) bool { return false }

// gate is a per-checkpoint budget with debt: share records per checkpoint
// interval; what one interval overspent is missing from the next.
type gate struct {
	share, left int64
	prev        int64 // records of the last poll that emitted any
	onComplete  bool  // renew on completion (Flink's GatedRateLimiter), not when taken
}

func (g *gate) need() int64 { return min(max(g.prev, 1), g.share) }

func (g *gate) ready() bool { return g.left >= g.need() }

func (g *gate) take(n int) {
	if n > 0 {
		g.left -= int64(n)
		g.prev = int64(n)
	}
}

func (g *gate) wait() (time.Duration, bool) { return 0, true }

func (g *gate) checkpoint(taken bool) bool {
	if taken == g.onComplete {
		return false
	}
	g.left = g.share + min(g.left, 0)
	return true
}
