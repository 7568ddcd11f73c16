package watermark_test

import (
	"fmt"
	"time"

	"github.com/sluice-io/sluice/watermark"
)

type event struct{ At int64 }

type printOut struct{}

func (printOut) EmitWatermark(ts int64) { fmt.Println("watermark", ts) }
func (printOut) MarkIdle()              { fmt.Println("idle") }

func ExampleBoundedOutOfOrderness() {
	s := watermark.BoundedOutOfOrderness[event](5 * time.Millisecond).
		WithTimestampAssigner(func(e event, _ int64) int64 { return e.At })
	g := s.NewGenerator()
	for _, e := range []event{{100}, {120}, {110}} {
		g.OnEvent(s.Timestamp(e, watermark.NoTimestamp), printOut{})
	}
	g.OnPeriodicEmit(printOut{})
	// Output: watermark 114
}

func ExampleCombiner() {
	c := watermark.NewCombiner[string]()
	c.Update("split-0", 100)
	c.Update("split-1", 40)
	wm, _, _ := c.Advance()
	fmt.Println(wm)
	c.MarkIdle("split-1")
	wm, _, _ = c.Advance()
	fmt.Println(wm)
	// Output:
	// 40
	// 100
}

func ExampleStrategy_WithWatermarkAlignment() {
	s := watermark.BoundedOutOfOrderness[event](5*time.Second).
		WithTimestampAssigner(func(e event, _ int64) int64 { return e.At }).
		WithWatermarkAlignment("orders-and-payments", 30*time.Second, 0)
	a, ok := s.Alignment()
	fmt.Println(ok, a.Group, a.MaxDrift, a.UpdateInterval, a.Validate())
	// Output: true orders-and-payments 30s 1s <nil>
}
