package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"

	"github.com/sluice-io/sluice/source"
)

// enumerator discovers files and hands out their splits on request (pull
// assignment). Its methods and the CallAsync handlers run on the
// coordinator goroutine only; listing runs in CallAsync.
//
// Bounded: the paths are listed once; readers that ask before the listing
// is done wait for it; afterwards a reader that asks when nothing is left
// gets SignalNoMoreSplits.
//
// Continuous: the paths are listed every DiscoveryInterval; files not in
// processed become splits. processed is pruned to the files that are still
// listed, so it stays bounded by the directory's size.
type enumerator struct {
	ctx        source.EnumeratorContext[Split]
	cfg        *sourceConfig
	splittable bool
	pending    []Split
	listed     bool
	processed  map[string]bool
	waiting    []int
	listErr    error // bounded: the listing failed for good
	retries    int   // bounded: failed listings so far
}

func newEnumerator(ctx source.EnumeratorContext[Split], cfg *sourceConfig, splittable bool, st EnumState) *enumerator {
	e := &enumerator{ctx: ctx, cfg: cfg, splittable: splittable, pending: slices.Clone(st.Pending), listed: st.Listed, processed: map[string]bool{}}
	for _, p := range st.Processed {
		e.processed[p] = true
	}
	return e
}

// A bounded source lists its paths again this often, listRetryDelay apart,
// before it gives up.
const (
	listRetries    = 3
	listRetryDelay = time.Second
)

func (e *enumerator) continuous() bool { return e.cfg.discovery > 0 }

func (e *enumerator) Start(context.Context) error {
	if e.continuous() {
		e.ctx.CallAsync(e.list, e.handleListing, 0, e.cfg.discovery)
	} else if !e.listed {
		e.ctx.CallAsync(e.list, e.handleListing, 0, 0)
	}
	return nil
}

func (e *enumerator) list(ctx context.Context) (any, error) {
	return listFiles(ctx, e.cfg.paths, e.cfg.filter)
}

func (e *enumerator) handleListing(res any, err error) {
	if err != nil {
		// A failed listing is retried at the next discovery (continuous)
		// or, after a few retries, fails the job (bounded).
		e.cfg.logger.Warn("file source: listing failed", "paths", e.cfg.paths, "err", err)
		if !e.continuous() {
			if e.retries < listRetries && !errors.Is(err, fs.ErrNotExist) {
				e.retries++
				e.ctx.CallAsync(e.list, e.handleListing, listRetryDelay, 0)
				return
			}
			e.listErr = fmt.Errorf("file source: list %q: %w", e.cfg.paths, err)
			e.ctx.FailJob(e.listErr)
			e.waiting = nil
		}
		return
	}
	files, _ := res.([]fileInfo)
	if e.continuous() {
		present := make(map[string]bool, len(files))
		for _, f := range files {
			present[f.path] = true
			if !e.processed[f.path] {
				e.processed[f.path] = true
				e.pending = append(e.pending, splitFile(f, e.splittable, e.cfg.blockSize)...)
			}
		}
		for p := range e.processed {
			if !present[p] {
				delete(e.processed, p)
			}
		}
	} else if !e.listed {
		e.listed = true
		for _, f := range files {
			e.pending = append(e.pending, splitFile(f, e.splittable, e.cfg.blockSize)...)
		}
	}
	e.serveWaiting()
}

func (e *enumerator) serveWaiting() {
	waiting := e.waiting
	e.waiting = nil
	for _, sub := range waiting {
		if _, ok := e.ctx.RegisteredReaders()[sub]; !ok {
			continue
		}
		if err := e.HandleSplitRequest(sub, ""); err != nil {
			e.cfg.logger.Error("file source: assigning a split failed", "subtask", sub, "err", err)
		}
	}
}

func (e *enumerator) HandleSplitRequest(subtask int, _ string) error {
	if e.listErr != nil {
		return e.listErr
	}
	if len(e.pending) > 0 {
		sp := e.pending[0]
		e.pending = e.pending[1:]
		return e.ctx.AssignSplits(map[int][]Split{subtask: {sp}})
	}
	if e.listed && !e.continuous() {
		e.ctx.SignalNoMoreSplits(subtask)
		return nil
	}
	if !slices.Contains(e.waiting, subtask) {
		e.waiting = append(e.waiting, subtask)
	}
	return nil
}

func (e *enumerator) AddSplitsBack(splits []Split, subtask int) error {
	e.pending = append(slices.Clone(splits), e.pending...)
	e.waiting = slices.DeleteFunc(e.waiting, func(s int) bool { return s == subtask })
	e.serveWaiting()
	return nil
}

func (e *enumerator) AddReader(int) error { return nil }

func (e *enumerator) SnapshotState(int64) (EnumState, error) {
	st := EnumState{Pending: slices.Clone(e.pending), Listed: e.listed}
	if e.continuous() {
		for p := range e.processed {
			st.Processed = append(st.Processed, p)
		}
		slices.Sort(st.Processed)
	}
	return st, nil
}

func (e *enumerator) Close() error { return nil }
