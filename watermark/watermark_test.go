package watermark_test

import (
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
