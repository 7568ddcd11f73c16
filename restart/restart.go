package restart

import (
	"errors"
	"fmt"
	"time"
)

// ErrUnrecoverable marks a failure that no restart can fix (Flink's
// SuppressRestartsException): a job whose failure wraps it fails at once,
// whatever its strategy says. Connectors wrap it when restarting would
// hide or repeat a loss, e.g. a Kafka producer fenced by another job, or
// when the job would meet the same failure again: a record that cannot be
// decoded, an expression that fails on a record.
var ErrUnrecoverable = errors.New("unrecoverable failure")

// Strategy decides whether and when a failed job restarts. Strategies are
// values without mutable state; the runtime counts attempts.
type Strategy interface {
	// Next returns the delay before restart number attempt (1 for the
	// first restart) and false when the job must not restart again.
	Next(attempt int) (time.Duration, bool)
	String() string
}

// None never restarts. It is the default.
func None() Strategy { return none{} }

type none struct{}

func (none) Next(int) (time.Duration, bool) { return 0, false }
func (none) String() string                 { return "none" }

// FixedDelay restarts up to maxAttempts times, waiting delay before each.
func FixedDelay(maxAttempts int, delay time.Duration) Strategy {
	return fixed{max: maxAttempts, delay: delay}
}

type fixed struct {
	max   int
	delay time.Duration
}

func (f fixed) Next(attempt int) (time.Duration, bool) {
	if attempt > f.max {
		return 0, false
	}
	return f.delay, true
}

func (f fixed) String() string { return fmt.Sprintf("fixed-delay(%d × %s)", f.max, f.delay) }

// Exponential restarts up to maxAttempts times; the delay starts at initial
// and doubles each time, capped at max.
func Exponential(initial, max time.Duration, maxAttempts int) Strategy {
	return expo{initial: initial, max: max, attempts: maxAttempts}
}

type expo struct {
	initial, max time.Duration
	attempts     int
}

func (e expo) Next(attempt int) (time.Duration, bool) {
	if attempt > e.attempts {
		return 0, false
	}
	d := e.initial
	for i := 1; i < attempt && d < e.max; i++ {
		d *= 2
	}
	if d > e.max {
		d = e.max
	}
	return d, true
}

func (e expo) String() string {
	return fmt.Sprintf("exponential(%s..%s, %d attempts)", e.initial, e.max, e.attempts)
}
