package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/enumerate"
)

// enumerator discovers files and hands out their splits on request (pull
// assignment); it is an enumerate.Discovered keyed by path, with the file
// source's state format around it. Its methods and the discovery handlers
// run on the coordinator goroutine only; listing runs in CallAsync.
//
// Bounded: the paths are listed once; readers that ask before the listing
// is done wait for it; afterwards a reader that asks when nothing is left
// gets SignalNoMoreSplits. A failed listing is retried listRetries times,
// listRetryDelay apart (not for a path that does not exist), then fails
// the job.
//
// Continuous: the paths are listed every DiscoveryInterval; files not
// processed before become splits. The processed set is pruned to the files
// that are still listed, so it stays bounded by the directory's size. A
// failed listing is logged and retried at the next discovery.
type enumerator struct {
	*enumerate.Discovered[Split]
	continuous bool
}

// A bounded source lists its paths again this often, listRetryDelay apart,
// before it gives up.
const (
	listRetries    = 3
	listRetryDelay = time.Second
)

func newEnumerator(ctx source.EnumeratorContext[Split], cfg *sourceConfig, splittable bool, st EnumState) *enumerator {
	continuous := cfg.discovery > 0
	b := source.Bounded
	if continuous {
		b = source.ContinuousUnbounded
	}
	d := enumerate.Discovery[Split]{
		Discover: func(ctx context.Context) ([]Split, error) {
			files, err := cfg.list(ctx)
			var splits []Split
			for _, f := range files {
				splits = append(splits, splitFile(f, splittable, cfg.blockSize)...)
			}
			return splits, err
		},
		Interval:   cfg.discovery,
		Key:        func(s Split) string { return s.Path },
		ForgetGone: true, // the processed set stays as large as the listing
		OnError: func(err error, failures int) error {
			cfg.logger.Warn("file source: listing failed", "paths", cfg.paths, "err", err)
			if continuous || (failures <= listRetries && !errors.Is(err, fs.ErrNotExist)) {
				return nil // retried at the next discovery, or after listRetryDelay
			}
			return fmt.Errorf("file source: list %q: %w", cfg.paths, err)
		},
		RetryDelay: listRetryDelay,
	}
	kst := enumerate.DiscoveredState[Split]{Pending: st.Pending, Done: st.Listed}
	if continuous {
		kst.Known = st.Processed
	}
	return &enumerator{Discovered: enumerate.NewDiscovered(ctx, d, b, kst), continuous: continuous}
}

// SnapshotState returns the state in the file source's format: Listed for
// a bounded source, Processed for a continuous one.
func (e *enumerator) SnapshotState(id int64) (EnumState, error) {
	kst, err := e.Discovered.SnapshotState(id)
	if err != nil {
		return EnumState{}, err
	}
	st := EnumState{Pending: kst.Pending}
	if e.continuous {
		st.Processed = kst.Known
	} else {
		st.Listed = kst.Done
	}
	return st, nil
}
