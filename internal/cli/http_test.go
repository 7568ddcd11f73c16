package cli

import (
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/pipeline"
)

func TestReadyAge(t *testing.T) {
	for _, tt := range []struct {
		interval, timeout, set, want time.Duration
	}{
		{200 * time.Millisecond, 10 * time.Minute, 0, 10*time.Minute + 600*time.Millisecond}, // 3 × interval + timeout
		{time.Second, time.Minute, 5 * time.Second, 5 * time.Second},                         // http.ready-checkpoint-age
		{0, time.Minute, 0, 0}, // no periodic checkpoints: no bound
	} {
		spec := &pipeline.Spec{CheckpointInterval: tt.interval, CheckpointTimeout: tt.timeout, HTTPReadyCheckpointAge: tt.set}
		if got := readyAge(spec); got != tt.want {
			t.Errorf("readyAge(interval %s, timeout %s, set %s) = %s, want %s", tt.interval, tt.timeout, tt.set, got, tt.want)
		}
	}
}
