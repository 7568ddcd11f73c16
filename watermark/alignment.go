package watermark

import (
	"errors"
	"fmt"
	"time"
)

// DefaultAlignmentUpdateInterval is how often sources in an alignment group
// re-check the group's bound when [Strategy.WithWatermarkAlignment] is given
// no update interval (Flink's default, one second).
const DefaultAlignmentUpdateInterval = time.Second

// ErrInvalidAlignment is wrapped by every error that [Alignment.Validate]
// returns.
var ErrInvalidAlignment = errors.New("invalid watermark alignment")

// Alignment configures watermark alignment (Flink's FLIP-182 across source
// subtasks and FLIP-217 across the splits of one reader). See the package
// documentation.
type Alignment struct {
	// Group names the alignment group: every source whose strategy names
	// the same group is aligned with the others.
	Group string
	// MaxDrift is how far a source subtask's or a split's watermark may run
	// ahead of the group's minimum watermark. It must be at least one
	// millisecond.
	MaxDrift time.Duration
	// UpdateInterval is how often a source subtask re-checks the group's
	// bound even when its own watermark did not change, so that a paused
	// subtask or split is resumed (default [DefaultAlignmentUpdateInterval]).
	UpdateInterval time.Duration
	// AllowUnalignedSplits lets a reader that holds several splits but
	// cannot pause one of them ([source.SplitPauser]) run anyway, aligned
	// per subtask only (Flink's
	// pipeline.watermark-alignment.allow-unaligned-source-splits). Without
	// it such a reader fails the job.
	AllowUnalignedSplits bool
}

// Validate reports what is wrong with the configuration, wrapping
// ErrInvalidAlignment.
func (a Alignment) Validate() error {
	var errs []error
	if a.Group == "" {
		errs = append(errs, fmt.Errorf("%w: the alignment group name is empty; sources that align with each other name the same group", ErrInvalidAlignment))
	}
	if a.MaxDrift < time.Millisecond {
		errs = append(errs, fmt.Errorf("%w: group %q: max allowed drift is %s; it must be at least 1ms", ErrInvalidAlignment, a.Group, a.MaxDrift))
	}
	if a.UpdateInterval < 0 {
		errs = append(errs, fmt.Errorf("%w: group %q: update interval %s is negative (0 means the default, %s)", ErrInvalidAlignment, a.Group, a.UpdateInterval, DefaultAlignmentUpdateInterval))
	}
	return errors.Join(errs...)
}

// WithWatermarkAlignment returns a copy of s whose sources take part in
// watermark alignment group group: a source subtask whose watermark is more
// than maxAllowedDrift ahead of the group's minimum stops reading, and so
// does a split of a reader with several splits, until the group catches
// up. updateInterval is how often a paused subtask or split re-checks; 0
// means [DefaultAlignmentUpdateInterval]. Invalid values fail the job at
// start (see [Alignment.Validate]).
//
// It is Flink's WatermarkStrategy.withWatermarkAlignment.
func (s Strategy[T]) WithWatermarkAlignment(group string, maxAllowedDrift, updateInterval time.Duration) Strategy[T] {
	s.align = Alignment{Group: group, MaxDrift: maxAllowedDrift, UpdateInterval: updateInterval,
		AllowUnalignedSplits: s.align.AllowUnalignedSplits}
	s.aligned = true
	return s
}

// WithUnalignedSourceSplits returns a copy of s that tolerates readers which
// hold several splits but cannot pause one of them: they are aligned per
// subtask only. It has no effect without [Strategy.WithWatermarkAlignment].
func (s Strategy[T]) WithUnalignedSourceSplits() Strategy[T] {
	s.align.AllowUnalignedSplits = true
	return s
}

// Alignment returns the strategy's alignment configuration, with the
// default update interval filled in, and whether alignment is enabled.
func (s Strategy[T]) Alignment() (Alignment, bool) {
	if !s.aligned {
		return Alignment{}, false
	}
	a := s.align
	if a.UpdateInterval == 0 {
		a.UpdateInterval = DefaultAlignmentUpdateInterval
	}
	return a, true
}

// IdlenessPauser is implemented by the generators of a strategy with
// [Strategy.WithIdleness]. While paused — its split or subtask is held back
// by watermark alignment — the generator does not declare its output idle
// for lack of records; on resume the idleness timeout starts over.
type IdlenessPauser interface {
	PauseIdleness(paused bool)
}

var _ IdlenessPauser = (*idleGen)(nil)
