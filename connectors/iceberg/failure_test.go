package iceberg

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectortest"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
	"go.uber.org/goleak"
)

// errGlobalFault is the error of an injected global-committer fault.
var errGlobalFault = errors.New("injected global-committer fault")

// globalFaults fails the global committer once at each of its faults: a
// fault {stage, n} fires at the first call of the hook at that stage whose
// checkpoint is at least n. It records every checkpoint whose files
// reached a commit attempt.
type globalFaults struct {
	mu     sync.Mutex
	faults []globalFault
	fired  []globalFault
	seen   map[int64]bool // checkpoints the committer tried to commit
}

type globalFault struct {
	stage string // "before-commit" or "after-commit"
	cp    int64
	done  bool
}

func (g *globalFaults) hook(_ context.Context, stage string, cp int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if stage == "before-commit" {
		g.seen[cp] = true
	}
	for i := range g.faults {
		f := &g.faults[i]
		if !f.done && f.stage == stage && cp >= f.cp {
			f.done = true
			g.fired = append(g.fired, *f)
			return fmt.Errorf("%w %s at checkpoint %d", errGlobalFault, stage, cp)
		}
	}
	return nil
}

// failureRecord is record k of the failure tests: 8 splits by k, event
// time one second per record from a fixed day, so that day and hour
// partitions both get several values.
func failureRecord(k int64) connectortest.Record {
	return connectortest.Record{Split: int(k % 8), Seq: k, Payload: "p" + strconv.FormatInt(k*7919%100003, 10)}
}

const failureEpoch = int64(1_780_000_000_000) // 2026-05-28, ms

// TestExactlyOnceUnderFailures writes a bounded stream into tables with
// different partition specs at parallelism 3 with checkpoints every 20 ms,
// under seeded random faults of every faultinject kind (reader after N
// records, snapshot, writer after N records, between prepare and commit,
// during commit, after prepare-commit in crash mode) plus global-committer
// faults between the data files' write and the snapshot commit and right
// after the snapshot commit — at least 10 faults per case. The table read
// back holds exactly the input; every snapshot is one checkpoint that
// carried data (each such checkpoint exactly once, ids increasing); no
// data file is referenced twice and every referenced file exists.
func TestExactlyOnceUnderFailures(t *testing.T) {
	testExactlyOnceUnderFailures(t, sqliteBackend)
}

// backend gives a test a catalog and a fresh table identifier in it.
type backend func(t *testing.T) (Catalog, table.Identifier)

// sqliteBackend is a SQLite SQL catalog with its warehouse in a temp dir.
func sqliteBackend(t *testing.T) (Catalog, table.Identifier) {
	return testCatalog(t.TempDir()), table.Identifier{"db", "events"}
}

func testExactlyOnceUnderFailures(t *testing.T, mk backend, extra ...Option) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cases := []struct {
		seed      int64
		partition []string
		crash     bool
	}{
		{1, []string{"day(ts)"}, false},
		{2, []string{"hour(ts)", "bucket(4, seq)"}, true},
		{3, []string{"split"}, false},
		{4, nil, true},
	}
	n := int64(40_000)
	if testing.Short() {
		cases, n = cases[:2], 12_000
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("seed=%d/%s", c.seed, strings.Join(c.partition, ",")), func(t *testing.T) {
			cat, ident := mk(t)
			const par = 3
			kinds := append(faultinject.Kinds(), faultinject.AfterPrepareCommit)
			plan := faultinject.RandomPlan(c.seed, 8, kinds, par, n/par/2, 12)
			if c.crash {
				plan.Crash()
			}
			gf := &globalFaults{seen: map[int64]bool{}, faults: []globalFault{
				{stage: "before-commit", cp: 2}, {stage: "after-commit", cp: 4},
				{stage: "before-commit", cp: 7}, {stage: "after-commit", cp: 9},
			}}
			part, err := ParsePartitionSpec(c.partition...)
			if err != nil {
				t.Fatal(err)
			}
			s, err := NewSink(cat, ident, testRow,
				append([]Option{CreateTable(testColumns, part, nil), EventTimeColumn("ts"), TargetFileSize(32 << 10), withHook(gf.hook)}, extra...)...)
			if err != nil {
				t.Fatal(err)
			}
			src := datagen.New(failureRecord, datagen.Count(n), datagen.Splits(8),
				datagen.Timestamps(func(k int64) int64 { return failureEpoch + k*1000 }), datagen.RatePerSecond(float64(n)))
			env := stream.New(stream.Parallelism(par), stream.CheckpointEvery(20*time.Millisecond),
				stream.Restart(restart.FixedDelay(20, 0)), stream.Logger(stream.DiscardLogger()))
			stream.SinkTo(stream.FromSource(env, faultinject.WrapSource(src, plan), watermark.None[connectortest.Record](), "gen"),
				faultinject.WrapSink(s, plan), "iceberg")
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			res, err := env.Execute(ctx, "iceberg-failures")
			if cerr := plan.CloseAbandoned(); cerr != nil {
				t.Logf("close abandoned writers: %v", cerr)
			}
			if err != nil {
				t.Fatalf("job: %v (fired %v, global %v)", err, plan.Fired(), gf.fired)
			}
			fired := len(plan.Fired()) + len(gf.fired)
			t.Logf("%d restarts; %d faults fired: %v, global %v", res.Restarts, fired, plan.Fired(), gf.fired)
			if fired < 10 {
				t.Errorf("only %d faults fired, want at least 10 (pending %v)", fired, plan.Pending())
			}
			st, err := readTable(t.Context(), cat, ident)
			if err != nil {
				t.Fatal(err)
			}
			checkExactly(t, st.records, n)
			checkSnapshots(t, st, gf.seen, n)
			for _, f := range st.files {
				u, err := url.Parse(f)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(u.Path); err != nil {
					t.Errorf("referenced data file missing: %v", err)
				}
			}
			orphans := len(dataFilesOnDisk(t, localPath(t, st.location))) - len(st.files)
			t.Logf("%d snapshots, %d data files referenced, %d unreferenced (failed attempts' orphans)", len(st.snapshots), len(st.files), orphans)
		})
	}
}

// checkExactly fails t unless got holds failureRecord(0 … n-1), each once.
func checkExactly(t *testing.T, got []connectortest.Record, n int64) {
	t.Helper()
	count := map[int64]int{}
	for _, r := range got {
		if want := failureRecord(r.Seq); r != want {
			t.Errorf("record %+v, want %+v", r, want)
			return
		}
		count[r.Seq]++
	}
	var missing, dup int
	for k := range n {
		switch count[k] {
		case 0:
			missing++
		case 1:
		default:
			dup++
		}
	}
	if missing > 0 || dup > 0 || int64(len(got)) != n {
		t.Errorf("table holds %d records, want %d: %d missing, %d more than once", len(got), n, missing, dup)
	}
}

// checkSnapshots fails t unless every snapshot is an append of this sink
// with an increasing checkpoint id, the checkpoints are exactly those
// whose files the global committer tried to commit, and the snapshots
// add n records in all.
func checkSnapshots(t *testing.T, st tableState, seen map[int64]bool, n int64) {
	t.Helper()
	var last int64
	var added int64
	got := map[int64]bool{}
	for _, s := range st.snapshots {
		p := s.Summary.Properties
		if r, ok := p[SummaryCompactedCheckpoints]; ok {
			if s.Summary.Operation != "replace" || p["added-records"] != p["deleted-records"] || p[SummaryJobID] == "" {
				t.Errorf("compaction snapshot %d (checkpoints %s): operation %s, summary %v", s.SnapshotID, r, s.Summary.Operation, p)
			}
			continue
		}
		cp, err := strconv.ParseInt(p[SummaryMaxCommittedCheckpoint], 10, 64)
		if err != nil || s.Summary.Operation != "append" || p[SummaryJobID] == "" {
			t.Errorf("snapshot %d: operation %s, summary %v: not one of the sink's appends", s.SnapshotID, s.Summary.Operation, p)
			continue
		}
		if late, ok := p[SummaryLateCheckpoint]; ok {
			// late files of an already committed checkpoint
			n, _ := strconv.ParseInt(late, 10, 64)
			t.Logf("snapshot %d: late files of checkpoint %d (max committed %d)", s.SnapshotID, n, cp)
			got[n] = true
			if cp != last {
				t.Errorf("late snapshot %d records checkpoint %d, want the max committed %d", s.SnapshotID, cp, last)
			}
		} else {
			if cp <= last {
				t.Errorf("snapshot %d commits checkpoint %d after checkpoint %d", s.SnapshotID, cp, last)
			}
			last = cp
			got[cp] = true
		}
		a, _ := strconv.ParseInt(p["added-records"], 10, 64)
		if a == 0 {
			t.Errorf("snapshot %d (checkpoint %d) adds no records", s.SnapshotID, cp)
		}
		added += a
	}
	if added != n {
		t.Errorf("the snapshots add %d records, want %d", added, n)
	}
	if !maps.Equal(got, seen) {
		t.Errorf("snapshots of checkpoints %v, want one per checkpoint that carried data: %v",
			slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(seen)))
	}
}

// TestSkipsCommittedCheckpoint hands the global committer a checkpoint's
// committables twice (as a restore does after a failure that followed the
// snapshot commit) and once more for an older checkpoint: only the first
// delivery makes a snapshot.
func TestSkipsCommittedCheckpoint(t *testing.T) { testSkipsCommittedCheckpoint(t, sqliteBackend) }

func testSkipsCommittedCheckpoint(t *testing.T, mk backend) {
	cat, ident := mk(t)
	s, err := New(cat, ident, testRow, CreateTable(testColumns, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ic := testInit{}
	prepare := func(cp int64, recs ...int64) []committable {
		w, err := s.CreateWriter(ctx, ic)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		for _, k := range recs {
			if err := w.Write(ctx, failureRecord(k), sink.Meta{}); err != nil {
				t.Fatal(err)
			}
		}
		cs, err := w.PrepareCommit(ctx, cp)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	c5, c6 := prepare(5, 0, 1, 2), prepare(6, 3)
	gc, err := s.CreateGlobalCommitter(ctx, ic)
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	for _, step := range []struct {
		id int64
		cs []committable
	}{{5, c5}, {5, c5}, {6, append(c5, c6...)}, {7, c6}} {
		if err := gc.CommitGlobal(ctx, step.id, step.cs); err != nil {
			t.Fatalf("CommitGlobal(%d): %v", step.id, err)
		}
	}
	st, err := readTable(ctx, cat, ident)
	if err != nil {
		t.Fatal(err)
	}
	checkExactly(t, st.records, 4)
	if len(st.snapshots) != 2 {
		t.Errorf("%d snapshots, want 2 (checkpoints 5 and 6)", len(st.snapshots))
	}
}

// TestRetriesConflictingCommit makes another writer commit between the
// global committer's check and its commit: the commit conflicts and is
// retried on the fresh metadata, keeping both writers' data.
func TestRetriesConflictingCommit(t *testing.T) { testRetriesConflictingCommit(t, sqliteBackend) }

func testRetriesConflictingCommit(t *testing.T, mk backend) {
	cat, ident := mk(t)
	other, err := New(cat, ident, testRow, CreateTable(testColumns, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	otherIC := testInit{job: "other-job"}
	var raced atomic.Bool
	var otherCS []committable
	s, err := New(cat, ident, testRow, CreateTable(testColumns, nil, nil),
		withHook(func(ctx context.Context, stage string, cp int64) error {
			if stage != "before-commit" || !raced.CompareAndSwap(false, true) {
				return nil
			}
			gc, err := other.CreateGlobalCommitter(ctx, otherIC)
			if err != nil {
				return err
			}
			defer gc.Close()
			return gc.CommitGlobal(ctx, 1, otherCS)
		}))
	if err != nil {
		t.Fatal(err)
	}
	write := func(s *Sink[connectortest.Record], ic sink.InitContext, cp int64, recs ...int64) []committable {
		w, err := s.CreateWriter(ctx, ic)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		for _, k := range recs {
			if err := w.Write(ctx, failureRecord(k), sink.Meta{}); err != nil {
				t.Fatal(err)
			}
		}
		cs, err := w.PrepareCommit(ctx, cp)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	otherCS = write(other, otherIC, 1, 10, 11)
	mine := write(s, testInit{}, 1, 0, 1, 2)
	gc, err := s.CreateGlobalCommitter(ctx, testInit{})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	if err := gc.CommitGlobal(ctx, 1, mine); err != nil {
		t.Fatal(err)
	}
	st, err := readTable(ctx, cat, ident)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.records) != 5 || len(st.snapshots) != 2 {
		t.Errorf("%d records in %d snapshots, want 5 in 2 (the other writer's and the retried one)", len(st.records), len(st.snapshots))
	}
}
