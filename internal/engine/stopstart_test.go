package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// blockedStartSink's writers block in CreateWriter until their ctx is
// cancelled, as a sink retrying an unreachable system does.
type blockedStartSink struct{ entered chan struct{} }

func (s *blockedStartSink) CreateWriter(ctx context.Context, _ sink.InitContext) (sink.Writer[int64], error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestStopWhileStarting: Stop called while a sink's writer is still being
// created (and stays blocked) cancels the start after the grace instead of
// waiting for a final checkpoint that cannot come: the job ends Cancelled,
// with an error that is context.Canceled. Before the fix Stop waited for
// ever (here: until the test's own deadline).
func TestStopWhileStarting(t *testing.T) {
	snk := &blockedStartSink{entered: make(chan struct{}, 1)}
	env := stream.New(stream.Logger(engine.DiscardLogger()))
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Splits(1))
	stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "gen"), snk, "blocked")
	h, err := env.Start(context.Background(), "stop-while-starting")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Cancel()
	select {
	case <-snk.entered:
	case <-time.After(time.Minute):
		t.Fatal("the writer was never created")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := h.Stop(ctx)
	if ctx.Err() != nil {
		t.Fatal("Stop did not return: a stop while starting waits for a final checkpoint that cannot come")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop: %v, want an error that is context.Canceled", err)
	}
	if res == nil || res.State != stream.Cancelled {
		t.Fatalf("result %+v, want state %s", res, stream.Cancelled)
	}
}
