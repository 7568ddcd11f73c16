package filesink

import (
	"context"

	"github.com/sluice-io/sluice/sink"
)

// NewWithoutCleanup returns the sink with its recovery cleanup removed: a
// restarted writer leaves the files that aborted attempts prepared.
func NewWithoutCleanup(dir string) sink.Sink[string] {
	return sink.NewTwoPhase[string, string](noCleanup{&fileSink{dir}})
}

type noCleanup struct{ *fileSink }

func (s noCleanup) CreateWriter(_ context.Context, ic sink.InitContext) (sink.CommittingWriter[string, string], error) {
	return &writer{fileSink: s.fileSink, sub: int64(ic.SubtaskIndex())}, nil
}
