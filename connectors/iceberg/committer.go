package iceberg

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// globalCommitter appends the data files of each checkpoint to the table
// in one snapshot whose summary records the job, the operator and the
// checkpoint. Before committing a checkpoint it walks the table's snapshot
// ancestry (from the current snapshot back) to the newest snapshot of
// this job and operator: a checkpoint at or below the checkpoint recorded
// there is committed already (a re-delivery after a failure) and is
// skipped. A commit that conflicts with another writer's is retried on
// the table's fresh metadata, after the same check.
type globalCommitter struct {
	open   Catalog
	ident  table.Identifier
	cfg    config
	job    string
	op     string
	cat    catalog.Catalog // opened on first use
	tbl    *table.Table
	logger func(msg string, args ...any)
}

func newGlobalCommitter(open Catalog, ident table.Identifier, cfg config, job, op string) *globalCommitter {
	g := &globalCommitter{open: open, ident: ident, cfg: cfg, job: job, op: op}
	g.logger = cfg.logger.With("table", strings.Join(ident, "."), "operator", op).Info
	return g
}

func (g *globalCommitter) name() string { return strings.Join(g.ident, ".") }

// CommitGlobal commits the files of every checkpoint in committed, one
// snapshot per checkpoint, oldest first.
func (g *globalCommitter) CommitGlobal(ctx context.Context, checkpointID int64, committed []committable) error {
	// The runtime hands a committable over at least once, possibly twice
	// in one call (restored and committed again): a file's path, unique
	// by its UUID, identifies it.
	byCP := map[int64][]fileDesc{}
	where := map[string]int64{}
	for _, c := range committed {
		for _, f := range c.Files {
			if cp, dup := where[f.Path]; dup {
				if cp != c.Checkpoint {
					return fmt.Errorf("iceberg: table %s: data file %s is in the committables of checkpoints %d and %d", g.name(), f.Path, cp, c.Checkpoint)
				}
				continue
			}
			where[f.Path] = c.Checkpoint
			byCP[c.Checkpoint] = append(byCP[c.Checkpoint], f)
		}
	}
	if len(byCP) == 0 {
		return nil
	}
	if g.cat == nil {
		cat, err := g.open(ctx)
		if err != nil {
			return err
		}
		g.cat = cat
	}
	for _, cp := range slices.Sorted(maps.Keys(byCP)) {
		if err := g.commitCheckpoint(ctx, cp, byCP[cp]); err != nil {
			return fmt.Errorf("iceberg: table %s, checkpoint %d: %w", g.name(), cp, err)
		}
	}
	if err := g.maybeCompact(ctx); err != nil {
		return fmt.Errorf("iceberg: table %s, compaction: %w", g.name(), err)
	}
	return nil
}

// commitCheckpoint appends files as the snapshot of checkpoint cp, unless
// the table has it already.
func (g *globalCommitter) commitCheckpoint(ctx context.Context, cp int64, files []fileDesc) error {
	wait := g.cfg.commitRetryWait
	for attempt := 0; ; attempt++ {
		tbl, err := g.cat.LoadTable(ctx, g.ident)
		if err != nil {
			return fmt.Errorf("load the table: %w", err)
		}
		g.tbl = tbl
		record, add, late := cp, files, false
		if done := maxCommitted(tbl.Metadata(), g.job, g.op); done >= cp {
			// A re-delivery, or part of the checkpoint's committables
			// arriving after a later checkpoint was committed (a subtask's
			// commit retried after a regional restart): add only the
			// files the table does not reference yet.
			add, err = g.uncommitted(ctx, tbl, files)
			if err != nil {
				return err
			}
			if len(add) == 0 {
				g.logger("checkpoint committed already, skipped", "checkpoint", cp, "max_committed_checkpoint", done, "files", len(files))
				return nil
			}
			g.logger("late files of a committed checkpoint; committing them", "checkpoint", cp, "max_committed_checkpoint", done, "files", len(add))
			record, late = done, true
		}
		err = g.commitOnce(ctx, tbl, record, cp, late, add)
		if err == nil {
			return g.afterCommit(ctx, cp)
		}
		if !errors.Is(err, table.ErrCommitFailed) {
			// A requirement that failed in the catalog (the branch moved
			// or was created meanwhile) is a conflict too; anything else
			// leaves the commit state unknown: look at the table.
			fresh, lerr := g.cat.LoadTable(ctx, g.ident)
			if lerr != nil {
				return fmt.Errorf("%w (and reloading the table failed: %w)", err, lerr)
			}
			if maxCommitted(fresh.Metadata(), g.job, g.op) >= cp {
				g.logger("snapshot commit reported an error but is in the table", "checkpoint", cp, "error", err)
				return g.afterCommit(ctx, cp)
			}
			if mainSnapshotID(fresh.Metadata()) == mainSnapshotID(tbl.Metadata()) {
				return err // the table did not move: not a conflict
			}
		}
		if attempt >= g.cfg.commitRetries {
			return fmt.Errorf("%w: %d attempts: %w", ErrCommitConflict, attempt+1, err)
		}
		g.logger("snapshot commit conflicted with another writer; retrying on fresh metadata", "checkpoint", cp, "attempt", attempt+1, "error", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
		wait = min(wait*2, defaultCommitRetryMaxWait)
	}
}

func (g *globalCommitter) afterCommit(ctx context.Context, cp int64) error {
	if g.cfg.hook != nil {
		return g.cfg.hook(ctx, "after-commit", cp)
	}
	return nil
}

// uncommitted returns the files the table's current snapshot does not
// reference and no compaction of this sink replaced. It reads the table's
// manifests, so it runs only for checkpoints at or below the newest
// committed one.
func (g *globalCommitter) uncommitted(ctx context.Context, tbl *table.Table, files []fileDesc) ([]fileDesc, error) {
	if tbl.CurrentSnapshot() == nil {
		return files, nil
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the table's data files: %w", err)
	}
	in, err := g.compactedFiles(ctx, tbl)
	if err != nil {
		return nil, err
	}
	for _, t := range tasks {
		in[t.File.FilePath()] = true
	}
	var out []fileDesc
	for _, f := range files {
		if !in[f.Path] {
			out = append(out, f)
		}
	}
	return out, nil
}

// mainSnapshotID is the id of the main branch's snapshot, -1 for none.
func mainSnapshotID(meta table.Metadata) int64 {
	if s := meta.SnapshotByName(table.MainBranch); s != nil {
		return s.SnapshotID
	}
	return -1
}

// commitOnce builds and commits one append snapshot on tbl's metadata. It
// pins the main branch to tbl's current snapshot, so that a concurrent
// commit makes it fail with table.ErrCommitFailed rather than being
// replayed by iceberg-go on metadata this committer has not checked.
func (g *globalCommitter) commitOnce(ctx context.Context, tbl *table.Table, cp, prepared int64, late bool, files []fileDesc) error {
	meta := tbl.Metadata()
	specs := map[int]iceberg.PartitionSpec{}
	for _, s := range meta.PartitionSpecs() {
		specs[s.ID()] = s
	}
	dfs := make([]iceberg.DataFile, 0, len(files))
	var records, bytes int64
	for _, f := range files {
		spec, ok := specs[f.SpecID]
		if !ok {
			return fmt.Errorf("data file %s: partition spec %d is not one of the table's", f.Path, f.SpecID)
		}
		df, err := f.dataFile(spec, partitionLogicalTypes(spec, tbl.Schema()))
		if err != nil {
			return err
		}
		dfs = append(dfs, df)
		records += f.Records
		bytes += f.Size
	}
	props := iceberg.Properties{}
	maps.Copy(props, g.cfg.snapshotProps)
	props[SummaryJobID] = g.job
	props[SummaryOperatorID] = g.op
	props[SummaryMaxCommittedCheckpoint] = strconv.FormatInt(cp, 10)
	if late {
		props[SummaryLateCheckpoint] = strconv.FormatInt(prepared, 10)
	}
	tx := tbl.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return fmt.Errorf("pin the main branch: %w", err)
	}
	var addOpts []table.WriteOption
	if !g.cfg.duplicateCheck {
		// the checkpoint skip above keeps a file from being added twice;
		// iceberg-go's check reads every manifest of the table
		addOpts = append(addOpts, table.WithoutDuplicateCheck())
	}
	if err := tx.AddDataFiles(ctx, dfs, props, addOpts...); err != nil {
		return fmt.Errorf("add %d data files: %w", len(dfs), err)
	}
	if g.cfg.hook != nil {
		if err := g.cfg.hook(ctx, "before-commit", cp); err != nil {
			return err
		}
	}
	start := time.Now()
	if _, err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit the snapshot: %w", err)
	}
	g.logger("committed a snapshot", "checkpoint", cp, "files", len(dfs), "records", records, "bytes", bytes, "took", time.Since(start))
	return nil
}

// maxCommitted walks the main branch's snapshots from the newest back and
// returns the checkpoint recorded by the newest snapshot of this job and
// operator, 0 if there is none (or the walk reaches an expired snapshot
// first).
func maxCommitted(meta table.Metadata, job, op string) int64 {
	s := meta.CurrentSnapshot()
	if ref := meta.SnapshotByName(table.MainBranch); ref != nil {
		s = ref
	}
	for seen := 0; s != nil && seen < 1<<20; seen++ {
		if s.Summary != nil {
			p := s.Summary.Properties
			if p[SummaryJobID] == job && p[SummaryOperatorID] == op {
				if n, err := strconv.ParseInt(p[SummaryMaxCommittedCheckpoint], 10, 64); err == nil {
					return n
				}
			}
		}
		if s.ParentSnapshotID == nil {
			return 0
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	return 0
}

func (g *globalCommitter) Close() error {
	if g.cat == nil {
		return nil
	}
	return closeCatalog(g.cat)
}
