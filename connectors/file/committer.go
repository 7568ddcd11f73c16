package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"

	"github.com/sluice-io/sluice/sink"
)

// commitRetries is how often a rename that failed for another reason than
// a missing file is retried before the job fails.
const commitRetries = 3

// committer renames pending part files to their final names. It runs on
// the runtime's committer goroutine.
type committer struct {
	root *os.Root
	dir  string
	// compacting: the sink compacts, so candidates are left to the global
	// committer.
	compacting bool
}

// Commit renames each pending file and then fsyncs the directories it
// renamed in. A file already renamed (its hidden name is gone and its final
// name exists) was committed by an earlier attempt: a success. A file with
// neither name fails the job with an error naming it.
//
// A compaction candidate (committable.Compact) stays hidden when the sink
// compacts: committing it only checks that its hidden file is there, or
// is gone because the global committer compacted it already. If the sink
// no longer compacts (restored with compaction turned off), candidates
// are renamed like other files, and a candidate with neither name counts
// as compacted by the earlier run.
func (c *committer) Commit(ctx context.Context, reqs []sink.CommitRequest[committable]) error {
	dirs := map[string]bool{}
	for _, r := range reqs {
		if err := ctx.Err(); err != nil {
			return err
		}
		cm := r.Committable()
		if cm.Marker != nil {
			continue // a partition commit report, no file
		}
		dir, err := bucketDir(cm.Bucket)
		if err != nil {
			r.SignalFailedWithUnknownReason(err)
			continue
		}
		from, to := path.Join(dir, cm.Temp), path.Join(dir, cm.Final)
		if cm.Discard {
			// A file left behind is removed by a later restore
			// (localDest.recover); it never fails the job.
			if err := c.root.Remove(from); err != nil && !errors.Is(err, fs.ErrNotExist) && r.Retries() < commitRetries {
				r.RetryLater()
			}
			continue
		}
		if cm.Compact && c.compacting {
			_, err = c.root.Lstat(from)
		} else {
			err = c.root.Rename(from, to)
		}
		switch {
		case err == nil:
			if !cm.Compact || !c.compacting {
				dirs[dir] = true
			}
		case errors.Is(err, fs.ErrNotExist):
			if _, serr := c.root.Lstat(to); serr == nil || cm.Compact {
				r.SignalAlreadyCommitted()
			} else {
				r.SignalFailedWithUnknownReason(fmt.Errorf("file sink: commit %s (checkpoint %d): neither the pending file nor the finished file exists: %w",
					path.Join(c.dir, to), r.CheckpointID(), err))
			}
		default:
			if r.Retries() >= commitRetries {
				r.SignalFailedWithUnknownReason(fmt.Errorf("file sink: commit %s (checkpoint %d): %w", path.Join(c.dir, to), r.CheckpointID(), err))
			} else {
				r.RetryLater()
			}
		}
	}
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		if err := syncDir(c.root, dir); err != nil {
			return fmt.Errorf("file sink: fsync directory %s after commit: %w", path.Join(c.dir, dir), err)
		}
	}
	return nil
}

func (c *committer) Close() error { return c.root.Close() }
