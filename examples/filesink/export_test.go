package filesink

import "github.com/sluice-io/sluice/sink"

// NewWithoutCleanup returns the sink with its recovery cleanup removed: a
// restarted writer leaves the files that aborted attempts prepared.
func NewWithoutCleanup(dir string) sink.Sink[string] {
	return sink.NewTwoPhase[string, Committable](&fileSink{dir: dir, noCleanup: true})
}
