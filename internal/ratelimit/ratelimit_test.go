package ratelimit

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestLimiter(t *testing.T) {
	type step struct {
		advance   time.Duration
		take      int
		want      int
		wantDelay time.Duration // Delay(1) after the take
	}
	tests := []struct {
		name  string
		rate  float64
		burst int
		steps []step
	}{
		{"starts full, then refills", 10, 5, []step{
			{0, 10, 5, 100 * time.Millisecond},
			{0, 10, 0, 100 * time.Millisecond},
			{50 * time.Millisecond, 1, 0, 50 * time.Millisecond},
			{50 * time.Millisecond, 3, 1, 100 * time.Millisecond},
			{10 * time.Second, 100, 5, 100 * time.Millisecond}, // capped at burst
		}},
		{"fractions accumulate", 3, 1, []step{
			{0, 1, 1, 333333334},
			{200 * time.Millisecond, 1, 0, 133333334},
			{200 * time.Millisecond, 1, 1, 333333334}, // 0.6+0.6 capped at 1, nothing left
		}},
		{"slow rate", 0.5, 1, []step{
			{0, 1, 1, 2 * time.Second},
			{time.Second, 1, 0, time.Second},
			{time.Second, 1, 1, 2 * time.Second},
		}},
		{"take zero", 100, 10, []step{
			{0, 0, 0, 0},
			{0, -1, 0, 0},
		}},
		{"clock going backwards adds nothing", 10, 2, []step{
			{0, 2, 2, 100 * time.Millisecond},
			{-time.Second, 1, 0, 100 * time.Millisecond},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &clock{t: time.Unix(1000, 0)}
			l := NewLimiter(tt.rate, tt.burst, c.now)
			for i, s := range tt.steps {
				c.advance(s.advance)
				if got := l.Take(s.take); got != s.want {
					t.Fatalf("step %d: Take(%d) = %d, want %d", i, s.take, got, s.want)
				}
				if got := l.Delay(1); got != s.wantDelay {
					t.Fatalf("step %d: Delay(1) = %v, want %v", i, got, s.wantDelay)
				}
			}
		})
	}
}

func TestLimiterDelayN(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	l := NewLimiter(100, 50, c.now)
	l.Take(50)
	tests := []struct {
		n    int
		want time.Duration
	}{
		{1, 10 * time.Millisecond},
		{25, 250 * time.Millisecond},
		{50, 500 * time.Millisecond},
		{1000, 500 * time.Millisecond}, // capped at burst
	}
	for _, tt := range tests {
		if got := l.Delay(tt.n); got != tt.want {
			t.Errorf("Delay(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

func TestBurstFor(t *testing.T) {
	tests := []struct {
		rate float64
		max  int
		want int
	}{
		{0.1, 1024, 1},
		{10, 1024, 1},
		{15, 1024, 2},
		{1000, 1024, 100},
		{1e9, 1024, 1024},
		{1e9, 0, 1},
	}
	for _, tt := range tests {
		if got := BurstFor(tt.rate, tt.max); got != tt.want {
			t.Errorf("BurstFor(%v, %d) = %d, want %d", tt.rate, tt.max, got, tt.want)
		}
	}
}

func TestNewLimiterPanics(t *testing.T) {
	for _, tt := range []struct {
		rate  float64
		burst int
	}{{0, 1}, {-1, 1}, {1, 0}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewLimiter(%v, %d) did not panic", tt.rate, tt.burst)
				}
			}()
			NewLimiter(tt.rate, tt.burst, nil)
		}()
	}
}

func TestTimer(t *testing.T) {
	var tm Timer
	if tm.Pending() || tm.C() != nil {
		t.Fatal("zero Timer is pending")
	}
	if ch := tm.Arm(0); !closed(ch) {
		t.Fatal("Arm(0) returned an open channel")
	}
	ch := tm.Arm(time.Millisecond)
	if again := tm.Arm(time.Hour); again != ch {
		t.Fatal("Arm while pending started a second timer")
	}
	<-ch // closes after 1ms; no timed assertion, just waits
	if tm.Pending() {
		t.Fatal("fired Timer still pending")
	}
	long := tm.Arm(time.Hour)
	if long == ch || !tm.Pending() {
		t.Fatal("Arm after firing did not start a new timer")
	}
	tm.Stop()
	if tm.Pending() {
		t.Fatal("stopped Timer still pending")
	}
	if closed(long) {
		t.Fatal("stopped Timer closed its channel")
	}
	tm.Stop() // idempotent
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
