package watermark

import (
	"math"
	"time"
)

const (
	// Min is the watermark before the first one: nothing is known yet.
	Min int64 = math.MinInt64
	// Max is the watermark at the end of input: no more records will come.
	Max int64 = math.MaxInt64
	// NoTimestamp marks a record without an event timestamp.
	NoTimestamp int64 = math.MinInt64
)

// Output receives what a Generator decides.
type Output interface {
	EmitWatermark(ts int64)
	MarkIdle()
}

// Generator derives watermarks from the timestamps of one split's (or one
// stream's) records. OnEvent is called for each record, OnPeriodicEmit every
// auto-watermark interval (200 ms by default), both from one goroutine.
type Generator interface {
	OnEvent(ts int64, out Output)
	OnPeriodicEmit(out Output)
}

// Strategy says how records get event timestamps and how watermarks follow
// from them. The zero value assigns no timestamps and makes no watermarks.
type Strategy[T any] struct {
	assigner func(v T, recordTimestamp int64) int64
	newGen   func() Generator
	idle     time.Duration
	now      func() time.Time
	align    Alignment
	aligned  bool
}

// None returns a strategy without timestamps or watermarks (the zero value).
func None[T any]() Strategy[T] { return Strategy[T]{} }

// Monotonous is for timestamps that never decrease: the watermark is the
// largest timestamp seen minus one millisecond.
func Monotonous[T any]() Strategy[T] {
	return BoundedOutOfOrderness[T](0)
}

// BoundedOutOfOrderness is for records that arrive at most maxDelay late:
// the watermark is the largest timestamp seen minus maxDelay minus one
// millisecond.
func BoundedOutOfOrderness[T any](maxDelay time.Duration) Strategy[T] {
	d := maxDelay.Milliseconds()
	return Strategy[T]{newGen: func() Generator { return &boundedGen{delay: d, max: Min} }}
}

// WithTimestampAssigner returns a copy of s that takes each record's event
// timestamp (milliseconds) from fn; recordTimestamp is the one the source
// attached, or NoTimestamp.
func (s Strategy[T]) WithTimestampAssigner(fn func(v T, recordTimestamp int64) int64) Strategy[T] {
	s.assigner = fn
	return s
}

// WithIdleness returns a copy of s that marks a split or stream idle after
// timeout without records, so that it does not hold back the watermark.
func (s Strategy[T]) WithIdleness(timeout time.Duration) Strategy[T] {
	s.idle = timeout
	return s
}

// WithClock returns a copy of s whose idleness timer reads now. For tests;
// the default is time.Now.
func (s Strategy[T]) WithClock(now func() time.Time) Strategy[T] {
	s.now = now
	return s
}

// Enabled reports whether the strategy makes watermarks at all.
func (s Strategy[T]) Enabled() bool { return s.newGen != nil }

// HasAssigner reports whether the strategy assigns timestamps.
func (s Strategy[T]) HasAssigner() bool { return s.assigner != nil }

// Timestamp returns v's event timestamp: the assigner's, else ts.
func (s Strategy[T]) Timestamp(v T, ts int64) int64 {
	if s.assigner == nil {
		return ts
	}
	return s.assigner(v, ts)
}

// NewGenerator makes a generator for one split or stream, or nil when the
// strategy makes no watermarks.
func (s Strategy[T]) NewGenerator() Generator {
	if s.newGen == nil {
		return nil
	}
	g := s.newGen()
	if s.idle > 0 {
		now := s.now
		if now == nil {
			now = time.Now
		}
		return &idleGen{inner: g, timeout: s.idle, now: now, last: now()}
	}
	return g
}

type boundedGen struct {
	delay int64
	max   int64
}

func (g *boundedGen) OnEvent(ts int64, _ Output) {
	if ts > g.max {
		g.max = ts
	}
}

func (g *boundedGen) OnPeriodicEmit(out Output) {
	if g.max == Min {
		return
	}
	out.EmitWatermark(g.max - g.delay - 1)
}

type idleGen struct {
	inner   Generator
	timeout time.Duration
	now     func() time.Time
	last    time.Time
	active  bool // an event arrived since the last periodic emit
	paused  bool // held back by watermark alignment: never idle
}

// PauseIdleness stops and restarts the idleness timer (watermark
// alignment).
func (g *idleGen) PauseIdleness(paused bool) {
	if paused == g.paused {
		return
	}
	g.paused = paused
	if !paused {
		g.last = g.now()
	}
}

func (g *idleGen) OnEvent(ts int64, out Output) {
	g.active = true
	g.inner.OnEvent(ts, out)
}

func (g *idleGen) OnPeriodicEmit(out Output) {
	if g.paused {
		g.inner.OnPeriodicEmit(out)
		return
	}
	now := g.now()
	if g.active {
		g.active, g.last = false, now
	} else if now.Sub(g.last) >= g.timeout {
		out.MarkIdle()
		return
	}
	g.inner.OnPeriodicEmit(out)
}
