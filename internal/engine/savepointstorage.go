package engine

import (
	"context"

	"github.com/sluice-io/sluice/checkpoint"
)

// SavepointStorage is implemented by checkpoint storages that write the
// job's savepoints themselves (the CLI's storage that keeps secrets out of
// snapshots). The runtime writes a savepoint into dir with SaveSavepoint
// if its storage implements it, else with checkpoint.SaveSavepoint.
type SavepointStorage interface {
	checkpoint.Storage
	// SaveSavepoint writes s as a self-contained savepoint directory
	// under dir, as checkpoint.SaveSavepoint does.
	SaveSavepoint(ctx context.Context, dir string, s *checkpoint.Snapshot) (checkpoint.Info, error)
}
