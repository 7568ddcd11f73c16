package watermark_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/watermark"
)

type rec struct {
	wms  []int64
	idle int
}

func (r *rec) EmitWatermark(ts int64) { r.wms = append(r.wms, ts) }
func (r *rec) MarkIdle()              { r.idle++ }

func TestIdlenessMarksIdleAfterTimeout(t *testing.T) {
	now := time.Unix(0, 0)
	s := watermark.Monotonous[int]().WithIdleness(time.Second).WithClock(func() time.Time { return now })
	g := s.NewGenerator()
	var out rec
	g.OnEvent(10, &out)
	g.OnPeriodicEmit(&out) // active
	now = now.Add(500 * time.Millisecond)
	g.OnPeriodicEmit(&out) // not yet idle
	if out.idle != 0 {
		t.Fatalf("idle after 500ms, want not idle")
	}
	now = now.Add(600 * time.Millisecond)
	g.OnPeriodicEmit(&out)
	if out.idle != 1 {
		t.Fatalf("got %d idle marks, want 1", out.idle)
	}
	g.OnEvent(20, &out)
	g.OnPeriodicEmit(&out)
	if got := out.wms[len(out.wms)-1]; got != 19 {
		t.Fatalf("got watermark %d after becoming active, want 19", got)
	}
}

func TestCombinerNeverGoesBack(t *testing.T) {
	c := watermark.NewCombiner[int]()
	c.Add(0)
	c.Add(1)
	if _, adv, _ := c.Advance(); adv {
		t.Fatal("advanced before any watermark")
	}
	c.Update(0, 50)
	c.Update(1, 60)
	if wm, adv, _ := c.Advance(); !adv || wm != 50 {
		t.Fatalf("got %d,%v want 50,true", wm, adv)
	}
	c.Add(2) // a new split at Min must not move the watermark back
	if wm, adv, _ := c.Advance(); adv || wm != 50 {
		t.Fatalf("got %d,%v want 50,false", wm, adv)
	}
	c.MarkIdle(0)
	c.MarkIdle(1)
	c.MarkIdle(2)
	if _, _, allIdle := c.Advance(); !allIdle {
		t.Fatal("want all idle")
	}
}

func TestAlignmentConfig(t *testing.T) {
	if _, ok := watermark.Monotonous[int]().Alignment(); ok {
		t.Fatal("alignment enabled by default")
	}
	if _, ok := watermark.Monotonous[int]().WithUnalignedSourceSplits().Alignment(); ok {
		t.Fatal("WithUnalignedSourceSplits alone enabled alignment")
	}
	a, ok := watermark.Monotonous[int]().WithUnalignedSourceSplits().WithWatermarkAlignment("g", time.Second, 200*time.Millisecond).Alignment()
	want := watermark.Alignment{Group: "g", MaxDrift: time.Second, UpdateInterval: 200 * time.Millisecond, AllowUnalignedSplits: true}
	if !ok || a != want {
		t.Fatalf("got %+v, %v; want %+v", a, ok, want)
	}
	// An invalid configuration stays enabled, so that it fails the job.
	a, ok = watermark.None[int]().WithWatermarkAlignment("", 0, -time.Second).Alignment()
	err := a.Validate()
	if !ok || !errors.Is(err, watermark.ErrInvalidAlignment) {
		t.Fatalf("got %v, %v; want enabled and invalid", ok, err)
	}
	for _, s := range []string{"group name is empty", "max allowed drift is 0s", "update interval -1s is negative"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
}

func TestIdlenessPaused(t *testing.T) {
	now := time.Unix(0, 0)
	g := watermark.Monotonous[int]().WithIdleness(time.Second).WithClock(func() time.Time { return now }).NewGenerator()
	var out rec
	g.OnEvent(10, &out)
	g.OnPeriodicEmit(&out)
	p, ok := g.(watermark.IdlenessPauser)
	if !ok {
		t.Fatal("a generator with idleness is not an IdlenessPauser")
	}
	p.PauseIdleness(true)
	now = now.Add(time.Hour)
	g.OnPeriodicEmit(&out)
	if out.idle != 0 {
		t.Fatal("idle while paused")
	}
	p.PauseIdleness(false) // the timeout starts over
	now = now.Add(500 * time.Millisecond)
	g.OnPeriodicEmit(&out)
	if out.idle != 0 {
		t.Fatal("idle 500ms after resuming")
	}
	now = now.Add(600 * time.Millisecond)
	g.OnPeriodicEmit(&out)
	if out.idle != 1 {
		t.Fatalf("got %d idle marks 1.1s after resuming, want 1", out.idle)
	}
}

func TestCombinerWatermark(t *testing.T) {
	c := watermark.NewCombiner[string]()
	if _, ok := c.Watermark("a"); ok {
		t.Fatal("unknown output registered")
	}
	c.Add("a")
	if wm, ok := c.Watermark("a"); !ok || wm != watermark.Min {
		t.Fatalf("got %d, %v; want Min, true", wm, ok)
	}
	c.Update("a", 7)
	if wm, _ := c.Watermark("a"); wm != 7 {
		t.Fatalf("got %d, want 7", wm)
	}
}
