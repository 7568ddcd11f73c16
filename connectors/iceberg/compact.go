package iceberg

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// SummaryCompactedCheckpoints marks a compaction snapshot of the sink
// (operation "replace"): it holds the range "first-last" of the
// checkpoints whose files it rewrote.
const SummaryCompactedCheckpoints = "sluice.compacted-checkpoints"

// Compaction turns on small-file compaction in the global committer: once
// the sink has committed n checkpoints since its last compaction, right
// after the CommitGlobal that committed the n-th it rewrites the data
// files those checkpoints' snapshots added — all of them since the last
// compaction, so more than n when one CommitGlobal committed several
// checkpoints (still live; per partition, each partition's files
// merged into files of [TargetFileSize]) and commits the result in one
// "replace" snapshot (iceberg-go's RewriteDataFiles) that deletes the
// small files and adds the merged ones atomically: a reader sees either
// the small files or the merged ones, so never a record twice nor none.
// Partitions with a single file are left as they are. The snapshot's
// summary carries the sink's job id, operator id and max committed
// checkpoint (so the exactly-once bookkeeping is unchanged) and
// [SummaryCompactedCheckpoints]. A compaction that fails or conflicts
// with another writer is logged and left for the next checkpoint; the
// files it wrote are orphans (see the README). Default 0: off.
func Compaction(n int) Option {
	return optionFunc(func(c *config) {
		if n < 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: Compaction(%d): want 0 (off) or more checkpoints", ErrInvalidConfig, n))
		}
		c.compactEvery = n
	})
}

// compactWindow returns the ids of every append snapshot of this job and
// operator since its newest compaction, newest first, with the
// checkpoint range they cover; nil when there are fewer than n. Every one
// of them, not only the newest n: when the global committer falls behind
// (a slow commit or compaction), the runtime hands it the committables of
// several checkpoints in one CommitGlobal, which commits one snapshot per
// checkpoint and then compacts once; a window of the newest n would leave
// the older snapshots' files out of every later compaction.
func compactWindow(meta table.Metadata, job, op string, n int) (snaps []int64, first, last int64) {
	s := meta.SnapshotByName(table.MainBranch)
	for seen := 0; s != nil && seen < 1<<20; seen++ {
		if s.Summary != nil {
			p := s.Summary.Properties
			if p[SummaryJobID] == job && p[SummaryOperatorID] == op {
				if _, ok := p[SummaryCompactedCheckpoints]; ok {
					break
				}
				if s.Summary.Operation == table.OpAppend {
					snaps = append(snaps, s.SnapshotID)
					cp, _ := strconv.ParseInt(p[SummaryMaxCommittedCheckpoint], 10, 64)
					if late, ok := p[SummaryLateCheckpoint]; ok {
						cp, _ = strconv.ParseInt(late, 10, 64)
					}
					if last == 0 || cp > last {
						last = cp
					}
					if first == 0 || cp < first {
						first = cp
					}
				}
			}
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	if len(snaps) < n {
		return nil, 0, 0
	}
	return snaps, first, last
}

// maybeCompact runs a compaction when n checkpoints were committed since
// the last one. Its failures are logged, not returned: compaction is
// maintenance, the checkpoint is committed either way.
func (g *globalCommitter) maybeCompact(ctx context.Context) error {
	if g.cfg.compactEvery <= 0 {
		return nil
	}
	err := g.compact(ctx)
	var he hookError
	if err != nil && ctx.Err() == nil && !errors.As(err, &he) {
		g.logger("compaction failed; the next checkpoint tries again", "error", err)
		return nil
	}
	return err
}

func (g *globalCommitter) compact(ctx context.Context) error {
	tbl, err := g.cat.LoadTable(ctx, g.ident)
	if err != nil {
		return fmt.Errorf("load the table: %w", err)
	}
	meta := tbl.Metadata()
	snaps, first, last := compactWindow(meta, g.job, g.op, g.cfg.compactEvery)
	if snaps == nil {
		return nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return err
	}
	manifests, err := meta.SnapshotByName(table.MainBranch).Manifests(fs)
	if err != nil {
		return fmt.Errorf("read the manifest list: %w", err)
	}
	window := map[int64]bool{}
	for _, id := range snaps {
		window[id] = true
	}
	files := map[string]bool{}
	for _, m := range manifests {
		if m.ManifestContent() != iceberg.ManifestContentData || !window[m.SnapshotID()] {
			continue
		}
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				return fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
			}
			files[e.DataFile().FilePath()] = true
		}
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return fmt.Errorf("plan the table's files: %w", err)
	}
	groups := map[string]*table.CompactionTaskGroup{}
	nfiles := map[string]map[string]bool{}
	for _, t := range tasks {
		p := t.File.FilePath()
		if !files[p] || len(t.DeleteFiles)+len(t.EqualityDeleteFiles)+len(t.DeletionVectorFiles) > 0 {
			continue
		}
		key := partitionKey(t.File)
		gr := groups[key]
		if gr == nil {
			gr = &table.CompactionTaskGroup{PartitionKey: key}
			groups[key], nfiles[key] = gr, map[string]bool{}
		}
		gr.Tasks = append(gr.Tasks, t)
		if !nfiles[key][p] {
			nfiles[key][p] = true
			gr.TotalSizeBytes += t.File.FileSizeBytes()
		}
	}
	var todo []table.CompactionTaskGroup
	for _, key := range slices.Sorted(maps.Keys(groups)) {
		if len(nfiles[key]) >= 2 {
			todo = append(todo, *groups[key])
		}
	}
	if len(todo) == 0 {
		return nil
	}
	props := iceberg.Properties{}
	maps.Copy(props, g.cfg.snapshotProps)
	props[SummaryJobID] = g.job
	props[SummaryOperatorID] = g.op
	props[SummaryMaxCommittedCheckpoint] = strconv.FormatInt(maxCommitted(meta, g.job, g.op), 10)
	props[SummaryCompactedCheckpoints] = fmt.Sprintf("%d-%d", first, last)
	start := time.Now()
	tx := tbl.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return fmt.Errorf("pin the main branch: %w", err)
	}
	res, err := tx.RewriteDataFiles(ctx, todo, table.RewriteDataFilesOptions{SnapshotProps: props,
		GroupOptions: []table.CompactionGroupOption{table.WithCompactionTargetFileSize(g.cfg.targetFileSize)}})
	if err != nil {
		return fmt.Errorf("rewrite the files of checkpoints %d-%d: %w", first, last, err)
	}
	if g.cfg.hook != nil {
		if err := g.cfg.hook(ctx, "before-compaction-commit", last); err != nil {
			return hookError{err}
		}
	}
	if _, err := tx.Commit(ctx); err != nil {
		if errors.Is(err, table.ErrCommitFailed) {
			return fmt.Errorf("commit the compaction (another writer committed meanwhile): %w", err)
		}
		return fmt.Errorf("commit the compaction: %w", err)
	}
	g.logger("compacted the files of checkpoints", "checkpoints", props[SummaryCompactedCheckpoints],
		"files_removed", res.RemovedDataFiles, "files_added", res.AddedDataFiles, "bytes_before", res.BytesBefore,
		"bytes_after", res.BytesAfter, "took", time.Since(start))
	if g.cfg.hook != nil {
		if err := g.cfg.hook(ctx, "after-compaction", last); err != nil {
			return hookError{err}
		}
	}
	return nil
}

// hookError is an error of the test hook, which fails CommitGlobal like a
// crash would rather than being logged as a failed compaction.
type hookError struct{ err error }

func (e hookError) Error() string { return e.err.Error() }
func (e hookError) Unwrap() error { return e.err }

// partitionKey identifies a data file's partition (spec and values).
func partitionKey(df iceberg.DataFile) string {
	p := df.Partition()
	keys := slices.Sorted(maps.Keys(p))
	s := strconv.Itoa(int(df.SpecID()))
	for _, k := range keys {
		s += fmt.Sprintf("|%d=%v", k, p[k])
	}
	return s
}

// compactedFiles are the data files that this job's compaction snapshots
// in the main branch's ancestry deleted: they were committed (and are in
// the table as merged files), so a late or re-delivered committable that
// names one of them must not append it again.
func (g *globalCommitter) compactedFiles(ctx context.Context, tbl *table.Table) (map[string]bool, error) {
	meta := tbl.Metadata()
	out := map[string]bool{}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	s := meta.SnapshotByName(table.MainBranch)
	for seen := 0; s != nil && seen < 1<<20; seen++ {
		if s.Summary != nil {
			p := s.Summary.Properties
			if _, ok := p[SummaryCompactedCheckpoints]; ok && p[SummaryJobID] == g.job && p[SummaryOperatorID] == g.op {
				ms, err := s.Manifests(fs)
				if err != nil {
					return nil, fmt.Errorf("read the manifest list of compaction snapshot %d: %w", s.SnapshotID, err)
				}
				for _, m := range ms {
					if m.SnapshotID() != s.SnapshotID || m.ManifestContent() != iceberg.ManifestContentData {
						continue
					}
					for e, err := range m.Entries(fs, false) {
						if err != nil {
							return nil, fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
						}
						if e.Status() == iceberg.EntryStatusDELETED {
							out[e.DataFile().FilePath()] = true
						}
					}
				}
			}
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	return out, nil
}
