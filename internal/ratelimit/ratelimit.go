package ratelimit

import (
	"fmt"
	"math"
	"time"
)

// Limiter is a token bucket: tokens accumulate at a fixed rate up to a
// burst size, and every emitted record costs one. The bucket starts full.
//
// A Limiter is not safe for concurrent use.
type Limiter struct {
	rate   float64 // tokens per second
	burst  float64
	tokens float64
	last   time.Time
	now    func() time.Time
}

// NewLimiter returns a bucket that refills at perSecond tokens per second and
// holds at most burst tokens. now is the clock; nil means time.Now. It
// panics if perSecond is not positive and finite or burst is below 1.
func NewLimiter(perSecond float64, burst int, now func() time.Time) *Limiter {
	if !(perSecond > 0) || math.IsInf(perSecond, 0) {
		panic(fmt.Sprintf("ratelimit: rate must be positive and finite, got %v", perSecond))
	}
	if burst < 1 {
		panic(fmt.Sprintf("ratelimit: burst must be at least 1, got %d", burst))
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{rate: perSecond, burst: float64(burst), tokens: float64(burst), last: now(), now: now}
}

// BurstFor returns a burst size for a reader limited to perSecond records:
// about 100 ms worth of tokens, at least 1 and at most maxBurst.
func BurstFor(perSecond float64, maxBurst int) int {
	b := math.Ceil(perSecond / 10)
	switch {
	case b < 1:
		return 1
	case b > float64(maxBurst):
		return max(1, maxBurst)
	}
	return int(b)
}

// Rate returns the refill rate in tokens per second.
func (l *Limiter) Rate() float64 { return l.rate }

// Burst returns the bucket's capacity.
func (l *Limiter) Burst() int { return int(l.burst) }

func (l *Limiter) refill() {
	t := l.now()
	if d := t.Sub(l.last); d > 0 {
		l.tokens = min(l.burst, l.tokens+d.Seconds()*l.rate)
	}
	l.last = t
}

// Take removes up to n whole tokens from the bucket and returns how many it
// removed: 0 when less than one token is available.
func (l *Limiter) Take(n int) int {
	if n <= 0 {
		return 0
	}
	l.refill()
	k := min(math.Floor(l.tokens), float64(n))
	if k < 1 {
		return 0
	}
	l.tokens -= k
	return int(k)
}

// Delay returns how long from now until the bucket holds n tokens (n is
// capped at the burst size); 0 if it already does. It never returns less
// than one nanosecond when tokens are missing.
func (l *Limiter) Delay(n int) time.Duration {
	l.refill()
	want := min(float64(max(n, 1)), l.burst)
	missing := want - l.tokens
	if missing <= 0 {
		return 0
	}
	return max(time.Duration(math.Ceil(missing/l.rate*float64(time.Second))), 1)
}

// Timer makes availability channels that close after a delay, for
// Reader.Available. The zero value is ready to use. Call Stop when the reader
// closes.
//
// A Timer is not safe for concurrent use (its callback, which only closes the
// channel, runs on a timer goroutine).
type Timer struct {
	t  *time.Timer
	ch chan struct{}
}

// Arm returns a channel that is closed once d has passed. While a channel
// returned earlier is still open, Arm returns that one instead of starting a
// second timer. A d of 0 or less returns a closed channel.
func (t *Timer) Arm(d time.Duration) <-chan struct{} {
	if t.ch != nil {
		select {
		case <-t.ch:
		default:
			return t.ch
		}
	}
	ch := make(chan struct{})
	t.ch = ch
	if d <= 0 {
		close(ch)
		return ch
	}
	t.t = time.AfterFunc(d, func() { close(ch) })
	return ch
}

// C returns the channel of the last Arm, or nil if Arm was never called.
func (t *Timer) C() <-chan struct{} { return t.ch }

// Pending reports whether an armed channel is still open.
func (t *Timer) Pending() bool {
	if t.ch == nil {
		return false
	}
	select {
	case <-t.ch:
		return false
	default:
		return true
	}
}

// Stop cancels a pending timer. The channel of a cancelled timer is never
// closed; the next Arm starts afresh.
func (t *Timer) Stop() {
	if t.t != nil && t.t.Stop() {
		t.ch = nil
	}
	t.t = nil
}
