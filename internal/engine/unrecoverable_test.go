package engine_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// TestUnrecoverableFailureIsNotRestarted: a failure that wraps
// restart.ErrUnrecoverable fails the job at once although its strategy
// allows restarts, in both failover modes.
func TestUnrecoverableFailureIsNotRestarted(t *testing.T) {
	for _, fo := range []engine.Failover{engine.FailoverRegion, engine.FailoverFull} {
		t.Run(fmt.Sprint(fo), func(t *testing.T) {
			env := stream.New(stream.Parallelism(2), stream.Restart(restart.FixedDelay(5, time.Millisecond)),
				stream.Failover(fo), stream.Logger(engine.DiscardLogger()))
			gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(100), datagen.Splits(2))
			m := stream.TryMap(stream.FromSource(env, gen, watermark.None[int64](), "g"), func(v int64) (int64, error) {
				if v == 50 {
					return 0, fmt.Errorf("lost for good: %w", restart.ErrUnrecoverable)
				}
				return v, nil
			})
			stream.SinkTo(m, testsink.NewCollect(testsink.NewStore[int64]()), "out")
			res, err := env.Execute(t.Context(), "unrecoverable")
			if !errors.Is(err, restart.ErrUnrecoverable) {
				t.Fatalf("got %v, want the unrecoverable failure", err)
			}
			if res.Restarts != 0 {
				t.Fatalf("%d restarts, want 0", res.Restarts)
			}
		})
	}
}
